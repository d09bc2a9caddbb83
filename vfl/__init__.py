"""The split-learning world: models with named cut layers, the two-party protocol, defences, data, runs."""
