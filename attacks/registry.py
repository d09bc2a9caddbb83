"""The one registry of attacks: where each attack's package is, and the presets they declare.

    spec("fedleak")            # imports attacks.hfl.fedleak only, returns its AttackSpec
    names("hfl")               # the attacks `splitlab hfl --attack` takes
    preset("dlg.original")     # a preset by its dotted name
    origin("toy")              # where an attack comes from (a plug-in's distribution, version, entry point)

The lab's own attacks are listed below, one line each; another package adds its attacks without editing
this one, through the entry point group `splitlab.attacks` (name = "module:SPEC"):

    [project.entry-points."splitlab.attacks"]
    toy = "my_package.toy:SPEC"

Importing this module imports no attack; `spec(name)` imports the one asked for. A plug-in is loaded when it
is asked for or listed, and its spec checked whole then (`attacks.spec_checks`): one that fails (whatever it
raises, SystemExit included; Ctrl-C aside) is a one-line error naming its entry point, and is listed as
"name (failed to load: ...)". A plug-in named like one of the
lab's attacks is not loaded; a line on stderr says so, once.
"""
from __future__ import annotations

import functools
import importlib
from importlib import metadata
from typing import Any

from attacks.spec import SETTINGS, AttackSpec, Preset, SpecError
from vfl import plugins
from vfl.errors import SplitlabError

__all__ = ["BUILTIN", "GROUP", "names", "spec", "specs", "preset", "presets", "origin", "failures", "listed",
           "plugin_names"]

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
        "bli": "attacks.split.bli:SPEC",
        "bli-replace": "attacks.split.bli:REPLACE_SPEC",
        "gr-backdoor": "attacks.split.gr_backdoor:SPEC",
        "esa": "attacks.split.feature_inference:SPEC",
        "grn": "attacks.split.feature_inference:GRN_SPEC",
    },
}
"""setting -> attack name -> where its spec is."""


def _builtin(name: str) -> str | None:
    return next((table[name] for table in BUILTIN.values() if name in table), None)


@functools.cache
def _entries() -> dict[str, metadata.EntryPoint]:
    """The group's entry points by name (nothing imported; `vfl.plugins.entries`: the lab's own name wins, the first
    of two distributions registering one name is used, each said once on stderr)."""
    return plugins.entries(GROUP, "attack", lambda name: _builtin(name) is not None)


def plugin_names() -> list[str]:
    """The plug-ins' names, from their entry points (none is imported)."""
    return list(_entries())


_FAILED: dict[str, str] = {}
"""plug-in name -> why it failed to load (its one-line error)."""


def _load_plugin(name: str, entry: metadata.EntryPoint) -> AttackSpec:
    found = plugins.load("attack", name, entry, AttackSpec, "an attacks.kit.AttackSpec", _FAILED,
                         (SplitlabError, SpecError))
    object.__setattr__(found, "entry_point", f"{entry.name} = {entry.value}")
    return found


def spec(name: str) -> AttackSpec:
    """The spec of attack `name` (imports its package only); a one-line error lists the attacks."""
    if not isinstance(name, str):
        raise SplitlabError(f"an attack is named by a string, not {type(name).__name__}; choose one of: "
                            f"{', '.join(names())}")
    return _spec(name)


@functools.cache
def _spec(name: str) -> AttackSpec:
    reference = _builtin(name)
    if reference is not None:
        module, _, attribute = reference.partition(":")
        _entries()                                      # a plug-in under this name is reported, once
        return getattr(importlib.import_module(module), attribute)
    entry = _entries().get(name)
    if entry is None:
        raise SplitlabError(f"unknown attack {name!r}; choose one of: {', '.join(names())}")
    return _load_plugin(name, entry)


def names(setting: str | None = None) -> list[str]:
    """Attack names, the lab's first; with `setting`, only those of that setting (a plug-in is loaded to read its
    setting, and one that fails to load is left out: `failures` says why)."""
    if setting is not None and setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}")
    own = [n for s, table in BUILTIN.items() if setting in (None, s) for n in table]
    plugged = [n for n in _entries() if setting is None or _plugin_setting(n) == setting]
    return own + plugged


def _plugin_setting(name: str) -> str | None:
    try:
        return spec(name).setting
    except SplitlabError:
        return None


def failures() -> dict[str, str]:
    """Every plug-in that fails to load (loading each): name -> its one-line error."""
    for name in _entries():
        _plugin_setting(name)
    return {n: _FAILED[n] for n in _entries() if n in _FAILED}


def listed(setting: str) -> list[str]:
    """The attacks of `setting` for a help text, then each plug-in that failed to load as "name (failed to load:
    why)" (its setting is unknown, so it is listed under every one)."""
    broken = failures()
    return names(setting) + [f"{n} (failed to load: {why.split(' failed to load: ', 1)[-1]})"
                             for n, why in broken.items()]


def origin(name: str) -> dict[str, Any]:
    """Where attack `name` comes from, for config.json: the lab's own module, or a plug-in's entry point,
    distribution and version."""
    reference = _builtin(name)
    if reference is not None:
        return {"attack": name, "source": reference, "entry_point": None}
    entry = _entries().get(name)
    if entry is None:
        raise SplitlabError(f"unknown attack {name!r}; choose one of: {', '.join(names())}")
    dist = getattr(entry, "dist", None)
    return {"attack": name, "source": entry.value, "entry_point": f"{entry.name} = {entry.value}",
            "distribution": None if dist is None else dist.metadata["Name"],
            "version": None if dist is None else dist.version}


def specs(setting: str | None = None) -> list[AttackSpec]:
    """Every registered spec that loads (imports every attack package)."""
    return [spec(n) for n in names(setting) if _builtin(n) is not None or _plugin_setting(n) is not None]


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
