"""Inductor's cache folder, made lazy: a `TORCHINDUCTOR_CACHE_DIR` that cannot be a folder stops only a
run that compiles, and in one line.

Torch creates the folder `$TORCHINDUCTOR_CACHE_DIR` names as soon as its compiler stack is imported, which
torchvision's import does, so a path that cannot be created (a file, a folder under a file) would stop
every command with a traceback at import: `--help` and runs that never compile included. The lab's front
door (`splitlab/__init__.py`) calls `set_aside_unusable_cache()` before torch is imported: such a value is
moved to `UNUSABLE_CACHE_VARIABLE` (torch then uses its default folder, as with the variable unset), and
`attacks.engine.compilation` refuses it only when asked to compile. Torch-free: it runs before torch loads.
"""
from __future__ import annotations

import os

__all__ = ["CACHE_VARIABLE", "UNUSABLE_CACHE_VARIABLE", "set_aside_unusable_cache"]

CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"
UNUSABLE_CACHE_VARIABLE = "SPLITLAB_UNUSABLE_INDUCTOR_CACHE_DIR"
"""Where the lab keeps a `TORCHINDUCTOR_CACHE_DIR` torch could not have created (inherited by child processes)."""


def _creatable(path: str) -> bool:
    """Whether `os.makedirs(path, exist_ok=True)` (what torch's import does) would succeed, found without
    creating anything: an existing folder, or a missing one whose nearest existing parent is a writable folder."""
    try:
        path = os.path.abspath(path)
        if os.path.isdir(path):
            return True
        if os.path.lexists(path):
            return False
        parent = os.path.dirname(path)
        while not os.path.lexists(parent):
            parent = os.path.dirname(parent)
        return os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK)
    except (OSError, ValueError):                # a NUL in the value, a name the system cannot look up
        return False


def set_aside_unusable_cache() -> None:
    """Move a `TORCHINDUCTOR_CACHE_DIR` that torch's import could not create to `UNUSABLE_CACHE_VARIABLE`."""
    path = os.environ.get(CACHE_VARIABLE)
    if path and not _creatable(path):
        os.environ[UNUSABLE_CACHE_VARIABLE] = path
        del os.environ[CACHE_VARIABLE]
