"""What the label-inference attacks share (not an attack itself): the victim they attack (split learning on a
labelled task, `victim.py`), what the attacking feature party observes (`observation.py`) and the experiment
that trains the victim, attacks and scores (`experiment.py`). Each attack is a package of its own beside this
one (`attacks/split/label_norm/`, ...), with one spec.
"""
