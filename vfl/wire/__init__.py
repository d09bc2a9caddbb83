"""The split-learning protocol over TCP: the label party and the feature parties as separate programs.
"""
