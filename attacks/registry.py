"""The one registry of attacks: where each attack's package is, and the presets they declare.

    spec("fedleak")            # imports attacks.hfl.fedleak only, returns its AttackSpec
    names("hfl")               # the attacks `splitlab hfl --attack` takes (no attack is imported)
    preset("dlg.original")     # a preset by its dotted name

The lab's own attacks are listed below, one line each; another package adds its attacks without editing
this one, through the entry point group `splitlab.attacks` (name = "module:SPEC"):

    [project.entry-points."splitlab.attacks"]
    toy = "my_package.toy:SPEC"

Importing this module imports no attack; `spec(name)` imports the one asked for.
"""
from __future__ import annotations

import functools
import importlib
from importlib import metadata

from attacks.spec import SETTINGS, AttackSpec, Preset
from vfl.errors import SplitlabError

__all__ = ["BUILTIN", "GROUP", "names", "spec", "specs", "preset", "presets"]

GROUP = "splitlab.attacks"

BUILTIN: dict[str, dict[str, str]] = {
    "hfl": {
        "dlg": "attacks.hfl.dlg:SPEC",
        "idlg": "attacks.hfl.dlg:IDLG_SPEC",
        "invgrad": "attacks.hfl.invgrad:SPEC",
        "gi": "attacks.hfl.gi:SPEC",
        "fedleak": "attacks.hfl.fedleak:SPEC",
        "awa": "attacks.hfl.awa:SPEC",
        "agic": "attacks.hfl.agic:SPEC",
        "tgias-ro": "attacks.hfl.tgias:SPEC",
    },
    "split": {
        "unsplit": "attacks.split.unsplit:SPEC",
        "fsha": "attacks.split.fsha:SPEC",
        "label-norm": "attacks.split.label_norm:SPEC",
        "label-direction": "attacks.split.label_direction:SPEC",
        "label-direct": "attacks.split.label_direct:SPEC",
        "label-completion": "attacks.split.label_completion:SPEC",
        "label-active": "attacks.split.label_completion:ACTIVE_SPEC",
        "label-unsplit": "attacks.split.label_unsplit:SPEC",
    },
}
"""setting -> attack name -> where its spec is."""


@functools.cache
def _plugins() -> dict[str, metadata.EntryPoint]:
    found = {}
    for entry in metadata.entry_points(group=GROUP):
        if any(entry.name in table for table in BUILTIN.values()):
            continue                                    # the lab's own name wins; `spec` says so when asked
        found[entry.name] = entry
    return found


def _load(reference: str) -> AttackSpec:
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


@functools.cache
def spec(name: str) -> AttackSpec:
    """The spec of attack `name` (imports its package only); a one-line error lists the attacks."""
    for table in BUILTIN.values():
        if name in table:
            found = _load(table[name])
            break
    else:
        entry = _plugins().get(name) if isinstance(name, str) else None
        if entry is None:
            raise SplitlabError(f"unknown attack {name!r}; choose one of: {', '.join(names())}")
        try:
            found = entry.load()
        except Exception as exc:                        # noqa: BLE001 - a broken plug-in is a user's error
            raise SplitlabError(f"attack {name!r} (entry point {entry.value}) failed to load: "
                                f"{type(exc).__name__}: {exc}") from None
    if not isinstance(found, AttackSpec) or found.name != name:
        raise SplitlabError(f"attack {name!r} must be registered as an attacks.spec.AttackSpec named {name!r}")
    return found


def names(setting: str | None = None) -> list[str]:
    """Attack names, the lab's first; with `setting`, only those of that setting (a plug-in is loaded
    to read its setting; the lab's own are not)."""
    if setting is not None and setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}")
    own = [n for s, table in BUILTIN.items() if setting in (None, s) for n in table]
    plugged = [n for n in _plugins() if setting is None or _plugin_setting(n) == setting]
    return own + plugged


def _plugin_setting(name: str) -> str | None:
    try:
        return spec(name).setting
    except SplitlabError:
        return None                                     # listed nowhere; `spec(name)` reports why


def specs(setting: str | None = None) -> list[AttackSpec]:
    """Every registered spec (imports every attack package)."""
    return [spec(n) for n in names(setting)]


def presets(setting: str | None = None) -> list[Preset]:
    return [p for s in specs(setting) for p in s.presets]


def preset(name: str, attack: str | None = None) -> Preset:
    """A preset by its dotted name (`dlg.original`), or by its short name under `attack`."""
    owner = attack if attack is not None else name.split(".", 1)[0]
    if attack is not None and "." in name and name.split(".", 1)[0] != attack:
        raise SplitlabError(f"preset {name} is for attack {name.split('.', 1)[0]}, not {attack}; use --preset "
                            + " or ".join(p.name for p in spec(attack).presets))
    if owner not in names():
        raise SplitlabError(f"unknown preset {name!r}; presets are named attack.variant (dlg.original)")
    return spec(owner).preset(name)
