"""The one registry of defences, and the one parser of a defence chain (`name[:key=value,...]` items joined by +).

    spec("marvell")                             # imports the module that declares it, returns its DefenceSpec
    names("send-back")                          # the defences at a point
    chain("orthogonal+activation-noise:sigma=0.1", FEATURE_POINTS, "--defence")   # parsed and checked, nothing built
    build(chain(...), Where(input_shape=(1, 28, 28)))                            # the hook objects, in order

The lab's own defences are listed below, one line each; another package adds its defences without editing this
one, through the entry point group `splitlab.defences` (name = "module:ATTR", ATTR a DefenceSpec):

    [project.entry-points."splitlab.defences"]
    my-noise = "my_package.noise:SPEC"

A plug-in is loaded when it is asked for or listed: one that fails to import (whatever it raises, SystemExit
included), points at something else or clashes with a lab defence's name is one line naming its entry point,
listed as failed to load, and the rest of the lab works on.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Iterable

from vfl.defences.spec import FLAGS, DefenceSpec, Where
from vfl import plugins
from vfl.errors import SplitlabError
from vfl.validate import parse_number

__all__ = ["GROUP", "BUILTIN", "spec", "specs", "names", "failures", "origin", "Chosen", "chain", "build", "needs"]

GROUP = "splitlab.defences"

BUILTIN: dict[str, str] = {
    "orthogonal": "vfl.defences.transforms:ORTHOGONAL",
    "semi-orthogonal": "vfl.defences.transforms:SEMI_ORTHOGONAL",
    "patch-orthogonal": "vfl.defences.transforms:PATCH_ORTHOGONAL",
    "input-dp": "vfl.defences.input_dp:SPEC",
    "activation-noise": "vfl.defences.noise:ACTIVATION_NOISE",
    "received-gradient-noise": "vfl.defences.noise:RECEIVED_GRADIENT_NOISE",
    "splitguard": "vfl.defences.splitguard:SPEC",
    "nopeek": "vfl.defences.nopeek:SPEC",
    "label-rr": "vfl.defences.label_dp:SPEC",
    "cae": "vfl.defences.cae:CAE",
    "dcae": "vfl.defences.cae:DCAE",
    "mid": "vfl.defences.mid:SPEC",
    "max-norm": "vfl.defences.send_back:MAX_NORM",
    "marvell": "vfl.defences.send_back:MARVELL",
    "gradient-noise": "vfl.defences.send_back:GRADIENT_NOISE",
    "sparsify": "vfl.defences.send_back:SPARSIFY",
    "clipped-noise": "vfl.defences.gradient_dp:CLIPPED_NOISE",
    "grad-perturb": "vfl.defences.gradient_dp:GRAD_PERTURB",
    "gaussian": "vfl.defences.upload:GAUSSIAN",
    "topk": "vfl.defences.upload:TOPK",
    "quant": "vfl.defences.upload:QUANT",
    "upload-dp": "vfl.defences.upload:UPLOAD_DP",
}
"""defence name -> where its spec is, in protocol order."""

_FAILED: dict[str, str] = {}


@functools.cache
def _entries() -> dict[str, metadata.EntryPoint]:
    """The group's entry points by name (nothing imported; `vfl.plugins.entries`: the lab's own name wins, the first
    of two distributions registering one name is used, each said once on stderr)."""
    return plugins.entries(GROUP, "defence", lambda name: name in BUILTIN or name == "none")


def _load_plugin(name: str, entry: metadata.EntryPoint) -> DefenceSpec:
    return plugins.load("defence", name, entry, DefenceSpec, "a DefenceSpec", _FAILED)


def spec(name: str) -> DefenceSpec:
    """The spec of defence `name`; a one-line error lists the defences."""
    if not isinstance(name, str):
        raise SplitlabError(f"a defence is named by a string, not {type(name).__name__}")
    return _spec(name)


@functools.cache
def _spec(name: str) -> DefenceSpec:
    reference = BUILTIN.get(name)
    if reference is not None:
        module, _, attribute = reference.partition(":")
        return getattr(importlib.import_module(module), attribute)
    entry = _entries().get(name)
    if entry is None:
        raise SplitlabError(f"unknown defence {name!r}; choose one of: none, {', '.join(names())}")
    return _load_plugin(name, entry)


def _loads(name: str) -> DefenceSpec | None:
    try:
        return spec(name)
    except SplitlabError:
        return None


def names(points: Iterable[str] | str | None = None) -> list[str]:
    """Defence names, the lab's first (in protocol order); with `points`, those acting there (a plug-in is loaded
    to read its point; one that fails is left out, `failures` says why)."""
    wanted = None if points is None else {points} if isinstance(points, str) else set(points)
    own = [n for n in BUILTIN if wanted is None or spec(n).point in wanted]
    plugged = [n for n in _entries() if (found := _loads(n)) is not None and (wanted is None or found.point in wanted)]
    return own + plugged


def specs(points: Iterable[str] | str | None = None) -> list[DefenceSpec]:
    return [spec(n) for n in names(points)]


def failures() -> dict[str, str]:
    """Every plug-in defence that fails to load: name -> its one-line error."""
    for name in _entries():
        _loads(name)
    return {n: _FAILED[n] for n in _entries() if n in _FAILED}


def origin(name: str) -> dict[str, Any]:
    """Where defence `name` comes from, for config.json."""
    if name in BUILTIN:
        return {"defence": name, "source": BUILTIN[name], "entry_point": None}
    entry = _entries()[name]
    dist = getattr(entry, "dist", None)
    return {"defence": name, "source": entry.value, "entry_point": f"{entry.name} = {entry.value}",
            "distribution": None if dist is None else dist.metadata["Name"],
            "version": None if dist is None else dist.version}


# --- a chain: parsed and checked once, where the config is built ---------------------------------------------

@dataclass(frozen=True)
class Chosen:
    """One defence of a chain: its spec, its checked settings and the options as given."""
    spec: DefenceSpec
    settings: Any
    options: dict[str, Any]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def text(self) -> str:
        return self.name + (":" + ",".join(f"{k}={v}" for k, v in self.options.items()) if self.options else "")


def _value(spec_: DefenceSpec, field: dataclasses.Field, check, key: str, text: str) -> Any:
    where = f"defence {spec_.name}"
    if check.kind in (int, float):
        return check(where, parse_number(where, text, integer=check.kind is int, symbol=key), key)
    return check(where, text, key) if check.kind is str and check.choices else check(where, text)


def item(text: str) -> Chosen:
    """One `name[:key=value,...]`: a known name, known keys, each value of its type and in its range, required keys
    present, the settings' own cross-option rules."""
    name, _, rest = text.strip().partition(":")
    found = spec(name.strip().lower())
    options_ = {f.name: (f, opt) for f, opt in found.options()}
    given: dict[str, Any] = {}
    for pair in filter(None, (part.strip() for part in rest.split(","))):
        key, sep, value = (part.strip() for part in pair.partition("="))
        if not sep:
            raise SplitlabError(f"defence option {pair!r} is not key=value (example: {found.example})")
        if key not in options_:
            raise SplitlabError(f"defence {found.name} does not take option {key!r}; it takes "
                                f"{', '.join(options_) or 'no options'}")
        if key in given:
            raise SplitlabError(f"defence {found.name} has option {key} twice; give it once")
        field, opt = options_[key]
        given[key] = _value(found, field, opt.check, key, value)
    missing = [k for k in found.required() if k not in given]
    if missing:
        raise SplitlabError(f"defence {found.name} needs option {', '.join(f'{k}=<value>' for k in missing)}")
    try:
        settings = found.settings(**given)
    except SplitlabError as exc:
        text_ = str(exc)
        raise SplitlabError(text_ if text_.startswith(f"defence {found.name}") else
                            f"defence {found.name}: {text_}") from None
    return Chosen(found, settings, given)


def split_list(text: str) -> list[str]:
    """A comma-separated list of chains, where a defence's own options are comma-separated too:
    "none,input-dp:epsilon=6,delta=0.5" -> ["none", "input-dp:epsilon=6,delta=0.5"] (an item that starts with
    key=value belongs to the chain before it)."""
    chains: list[str] = []
    for part in (t.strip() for t in text.split(",")):
        if not part:
            continue
        if chains and "=" in part.split(":")[0]:
            chains[-1] += "," + part
        else:
            chains.append(part)
    return chains


def chain(text: str, points: Iterable[str], flag: str) -> tuple[Chosen, ...]:
    """A chain `none` or `item+item+...` for the given points, checked whole: a defence at another point is refused
    in one line naming the flag that takes it; nothing is built."""
    if not isinstance(text, str):
        raise SplitlabError(f"{flag} takes a defence spec as text (none, or name[:key=value] items joined by +), "
                            f"not {type(text).__name__}")
    points = tuple(points)
    items = text.split("+")
    if not all(part.strip() for part in items):
        raise SplitlabError(f"defence spec {text!r} has an empty item; use none or name[:key=value] items joined by "
                            "+, e.g. orthogonal+activation-noise:sigma=0.1")
    chosen = []
    for part in items:
        name = part.strip().partition(":")[0].strip().lower()
        if name == "none":
            continue
        if name not in BUILTIN and name not in _entries():
            raise SplitlabError(f"unknown defence {name!r}; {flag} takes none, {', '.join(names(points))}")
        found = spec(name)
        if found.point not in points:
            elsewhere = "splitlab hfl's --defence" if found.point == "upload" else \
                f"a split-learning command's {FLAGS[found.point]}"
            raise SplitlabError(f"{name} acts at the {found.point} point ({found.party}'s); {flag} here takes "
                                f"defences at {' or '.join(points)}: give it with {elsewhere}")
        chosen.append(item(part))
    return tuple(chosen)


def needs(chosen: Iterable[Chosen]) -> set[str]:
    return {n for c in chosen for n in c.spec.needs}


def check(chosen: Iterable[Chosen], where: Where) -> Where:
    """That each defence fits the task (its needs and its own checks), in order; returns `where` with the input
    shape after the input defences."""
    for one in chosen:
        s = one.spec
        if "binary-task" in s.needs and where.classes is not None and where.classes != 2:
            raise SplitlabError(f"{s.name} is defined for binary tasks; this task has {where.classes} classes: use "
                                "--task binary or another defence")
        if "flat-input" in s.needs and where.flat_input is False:
            raise SplitlabError(f"defence {s.name} changes the input size; this bottom model cannot take it (a "
                                "split model with --arch mlp or small-mlp can)")
        if "label-model" in s.needs and where.label_model is False:
            raise SplitlabError(f"{s.name} adds layers the label party trains; this label party has no model to train "
                                "(--top none, or --aggregate sum): give it one (--top model or linear, --aggregate "
                                "concat)")
        if "labels-sent" in s.needs and where.labels_sent is False:
            raise SplitlabError(f"{s.name} needs a feature party that sends the labels with its activations (its fake "
                                "batches change them); here the label party holds them (over TCP, or --parties above "
                                "1): run it in process with --parties 1")
        if "image-input" in s.needs and where.input_shape is not None and len(where.input_shape) != 3:
            raise SplitlabError(f"{s.name} needs image inputs (C, H, W)")
        if s.fits is not None:
            s.fits(one.settings, where)
        if s.reshapes is not None and where.input_shape is not None:
            where = dataclasses.replace(where, input_shape=tuple(s.reshapes(one.settings, where.input_shape)))
    return where


def build(chosen: Iterable[Chosen], where: Where) -> list[Any]:
    """The hook objects of a checked chain, in order (an input defence that reshapes passes the new shape on)."""
    built = []
    for one in chosen:
        check([one], where)
        built.append(one.spec.build(one.settings, where))
        if one.spec.reshapes is not None and where.input_shape is not None:
            where = dataclasses.replace(where, input_shape=tuple(one.spec.reshapes(one.settings, where.input_shape)))
    return built

