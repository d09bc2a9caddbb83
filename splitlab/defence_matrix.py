"""Which split attack meets which defence: every pair runnable by configuration, or refused with its reason.

A split attack's victim (the one split case, over its family's defaults) takes the feature party's defences in its
`defence` field and the label party's in `send_back`. A pair is checked by building the family's victim with the
defence's example, the way a user's command would (a victim that cannot take a point refuses it there, with its reason): what the config refuses (a defence needing a binary task on a multiclass
one, a size-changing input transform on a convolutional model) is tried once more with what fixes it (--task
binary, --arch small-mlp), and said."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from attacks import registry as attacks
from vfl.defences import registry as defences
from vfl.defences.spec import FEATURE_POINTS, FLAGS, SPLIT_POINTS
from vfl.errors import SplitlabError

__all__ = ["Pair", "pair", "matrix", "FIELDS"]

FIELDS = {point: ("defence" if point in FEATURE_POINTS else "send_back") for point in SPLIT_POINTS}
"""The victim config's field (and so the command's flag) that takes a defence at each split point."""


@dataclass(frozen=True)
class Pair:
    attack: str
    defence: str
    runnable: bool
    how: str
    """The options that run it (`--send-back marvell:scale=1 --task binary`), or why it is refused."""
    extra: str = ""
    """What the task needs beyond the defence's own flag (`--task binary`)."""


def pair(attack: str, defence: str) -> Pair:
    spec, found = attacks.spec(attack), defences.spec(defence)
    config = spec.experiment.config
    field = FIELDS[found.point]
    names = {f.name for f in dataclasses.fields(config.victim_options)} - set(config.victim_hidden)
    if field not in names:
        return Pair(attack, defence, False, f"its victim has no {FLAGS[found.point]}")
    base = dict(spec.preset().experiment)
    flag = f"{FLAGS[found.point]} {found.example}"
    reason = ""
    for extra in ({}, {"task": "binary"}, {"arch": "small-mlp", "cut_layer": 1}):
        if not set(extra) <= names:
            continue
        try:                                             # the family's victim, as its command builds it
            config.victim_of(**{**base, **extra, field: found.example})
        except SplitlabError as exc:
            reason = reason or str(exc)                  # the default's reason: what a user meets first
            continue
        needed = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in extra.items())
        return Pair(attack, defence, True, f"{flag} {needed}".strip(), needed)
    return Pair(attack, defence, False, reason)


def matrix() -> list[Pair]:
    """Every split attack against every split defence (the lab's and the plug-ins that load)."""
    return [pair(a, d) for a in attacks.names("split") for d in defences.names(SPLIT_POINTS)]
