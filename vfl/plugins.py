"""Plug-ins of the lab (attacks, defences): read from an entry point group, loaded when asked for, each failure kept
to its plug-in. One implementation for every registry: a plug-in that fails to import (whatever it raises,
SystemExit included; Ctrl-C aside), points at something else or names itself otherwise is one line naming its
entry point, remembered so it is said the same way each time, and the rest of the lab works on."""
from __future__ import annotations

import sys
from importlib import metadata
from typing import Callable

from vfl.errors import SplitlabError

__all__ = ["described", "entries", "load"]


def described(entry: metadata.EntryPoint) -> str:
    """`entry point NAME = module:ATTR in DIST VERSION`, for messages."""
    dist = getattr(entry, "dist", None)
    where = f" in {dist.metadata['Name']} {dist.version}" if dist is not None else ""
    return f"entry point {entry.name} = {entry.value}{where}"


def entries(group: str, kind: str, own: Callable[[str], bool]) -> dict[str, metadata.EntryPoint]:
    """The group's entry points by name (nothing imported). One named like one of the lab's own (`own(name)`) is
    left out, and of two distributions registering one name the first found (sys.path's order) is used: each with
    a line on stderr (call this once per process)."""
    found: dict[str, metadata.EntryPoint] = {}
    for entry in metadata.entry_points(group=group):
        if own(entry.name):
            print(f"splitlab: plug-in {kind} {entry.name!r} ({described(entry)}) is not loaded: {entry.name} is one "
                  f"of the lab's own {kind}s; rename the entry point", file=sys.stderr)
        elif entry.name in found:
            if described(found[entry.name]) != described(entry):
                print(f"splitlab: plug-in {kind} {entry.name!r} is registered twice: {described(found[entry.name])} "
                      f"is used, {described(entry)} is not loaded; uninstall one or rename its entry point",
                      file=sys.stderr)
        else:
            found[entry.name] = entry
    return found


def load(kind: str, name: str, entry: metadata.EntryPoint, cls: type, shown: str, failed: dict[str, str],
         own_errors: tuple[type[BaseException], ...] = (SplitlabError,)):
    """The object `entry` points at, an instance of `cls` (`shown` in messages) named `name`; a failure is one
    line, kept in `failed` and raised as a SplitlabError now and on every later call."""
    if name in failed:
        raise SplitlabError(failed[name])
    try:
        found = entry.load()
        if not isinstance(found, cls):
            raise SplitlabError(f"it points at a {type(found).__name__}, not {shown}; point the entry point at the "
                                "module's spec (module:SPEC)")
        if found.name != name:
            raise SplitlabError(f"its spec is named {found.name!r}; name the entry point {found.name} or the spec "
                                f"{name}")
    except KeyboardInterrupt:
        raise
    except BaseException as exc:                # noqa: BLE001 - a broken plug-in (even one that exits) is one line
        reason = str(exc) if isinstance(exc, own_errors) else f"{type(exc).__name__}: {exc}"
        failed[name] = (f"plug-in {kind} {name!r} ({described(entry)}) failed to load: "
                        f"{(reason.splitlines() or [''])[0]}; fix or uninstall it")
        raise SplitlabError(failed[name]) from None
    return found
