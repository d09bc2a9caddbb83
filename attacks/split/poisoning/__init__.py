"""What the backdoor attacks share (not an attack itself): the trigger a poisoning feature party stamps on its own
features (`trigger.py`), the gradient replacement it runs in training (`replacement.py`) and the experiment that
trains the poisoned victim and the unpoisoned one beside it and scores the backdoor (`experiment.py`). Each attack
is a package of its own (`attacks/split/bli/` for `bli-replace`, `attacks/split/gr_backdoor/`), with one spec.
"""
