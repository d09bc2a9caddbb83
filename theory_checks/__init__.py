"""Executable checks of the JAST paper's invariance lemmas and bounds, run through the real protocol."""
