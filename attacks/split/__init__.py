"""Attacks on split learning: UnSplit (honest-but-curious server) and FSHA (malicious server)."""
