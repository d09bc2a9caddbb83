"""Attacks on split and horizontal federated learning, all through one reconstruction engine."""
