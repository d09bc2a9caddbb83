"""Inductor's source keys, kept beside its cache so a new process does not hash torch and triton again.

Every key of inductor's FX graph cache includes `torch_key()` (a SHA-256 of every source file of the torch
package) and, through `CacheBase.get_system()`, `triton_key()` (triton's hash of its own sources and
compiler library). Torch computes both once per process, on the first compile: with a warm cache that is
the largest one-off cost after dynamo's tracing (0.15 and 0.48 CPU seconds measured here). Both are
functions of the installed files only, so `reuse()` keeps them in `KEYS_FILE` in inductor's cache folder,
filed under a fingerprint of the installation: each package's version, folder and installer's RECORD (the
list of every installed file with its SHA-256, which pip writes). A reinstall or upgrade changes the
fingerprint and the keys are computed anew. What it does not see is a file edited in place after
installation: a torch built in place (no RECORD that lists inductor's own source) is never fingerprinted,
so torch hashes it as usual.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os

__all__ = ["KEYS_FILE", "fingerprint", "reuse"]

KEYS_FILE = "splitlab_source_keys.json"
_DONE = False


def _record(package: str, marker: str) -> bytes | None:
    """The installer's RECORD of `package`, or None where it is missing or does not list `marker`."""
    try:
        text = importlib.metadata.distribution(package).read_text("RECORD")
    except importlib.metadata.PackageNotFoundError:
        return None
    return text.encode() if text and marker in text else None


def fingerprint() -> str | None:
    """A SHA-256 over torch's and triton's versions, folders and RECORDs; None where torch has no usable RECORD."""
    import torch

    torch_record = _record("torch", "torch/_inductor/codecache.py")
    if torch_record is None:
        return None
    digest = hashlib.sha256()
    for part in (torch.__version__, os.path.dirname(torch.__file__), torch_record):
        digest.update(part if isinstance(part, bytes) else part.encode())
        digest.update(b"\0")
    try:
        import triton
        digest.update(f"{triton.__version__}\0{os.path.dirname(triton.__file__)}\0".encode())
        digest.update(_record("triton", "triton/runtime/cache.py") or b"no record")
    except ImportError:
        digest.update(b"no triton")
    return digest.hexdigest()


def reuse(folder: str) -> None:
    """Give torch its source keys from `folder`'s KEYS_FILE where this installation's are there; else let
    torch compute them now and file them there. Once per process; a key torch already holds is left alone."""
    global _DONE
    if _DONE:
        return
    _DONE = True
    from torch._inductor import codecache

    key = fingerprint()
    if key is None:
        return
    path = os.path.join(folder, KEYS_FILE)
    try:
        with open(path) as f:
            known = json.load(f)
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known = {}
    entry = known.get(key)
    if isinstance(entry, dict) and isinstance(entry.get("torch"), str):
        for function, value in ((codecache.torch_key, bytes.fromhex(entry["torch"])),
                                (codecache.triton_key, entry.get("triton"))):
            try:
                function.set(value)
            except RuntimeError:            # torch computed it already (a compile before this one)
                pass
        return
    triton = codecache.triton_key()
    known = {key: {"torch": codecache.torch_key().hex(), "triton": triton}}      # only this installation's
    try:
        os.makedirs(folder, exist_ok=True)
        partial = f"{path}.{os.getpid()}.tmp"          # processes of a sweep may file it at once
        with open(partial, "w") as f:
            json.dump(known, f)
        os.replace(partial, path)
    except OSError:
        pass                                # an unwritable cache only loses the shortcut
