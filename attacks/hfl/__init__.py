"""Horizontal-FL gradient inversion: what an honest-but-curious server observes, label recovery, attacks."""
