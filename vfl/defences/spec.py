"""The declaration of a defence: one `DefenceSpec` each, beside the code that implements it.

A spec says everything the lab needs to run, document and check a defence without naming it anywhere else:
its name (one meaning across the lab), the protocol point it acts at, its options as a settings dataclass in the
attacks' one option vocabulary (`vfl.options.option`), how it is built for a task, what it needs, its paper and
how the lab departs from it, and the options at which it is no defence at all (its zero strength), which the
registry-wide contract test holds bit for bit to no defence.

    SPEC = DefenceSpec(name="activation-noise", point="activations", title="Gaussian noise on the activations sent",
                       paper="...", settings=NoiseSettings, build=lambda s, where: ActivationNoise(s.sigma, s.seed),
                       example="activation-noise:sigma=0.1", zero={"sigma": 0.0})

What a built defence is depends on its point (`POINTS`): a `ClientDefence` (input, activations, received-gradient,
feature-loss: the feature party's hooks, all taken by `--defence`), a `SendBackDefence` (labels, label-layers,
send-back: the label party's hooks, all taken by `--send-back`, the label party's one flag), an upload defence (a
callable on an HFL client's upload list).
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, field
from typing import Any, Callable, Mapping

import torch

from vfl.deviations import Deviation
from vfl.errors import SplitlabError
from vfl.options import Validated, options_of

__all__ = ["POINTS", "SPLIT_POINTS", "FEATURE_POINTS", "LABEL_POINTS", "FLAGS", "NEEDS", "DefenceSettings", "Where",
           "Deviation", "DefenceSpec"]

POINTS: dict[str, str] = {
    "input": "the feature party's input, before its bottom model",
    "activations": "the activations the feature party sends across the cut",
    "received-gradient": "the cut gradient the feature party receives, before it backpropagates it",
    "feature-loss": "an extra term of the feature party's training loss, from its input and its activations",
    "labels": "the training labels the label party trains on (set once, before training)",
    "label-layers": "layers the label party puts between the activations it receives and its top model, with "
                    "their own loss term",
    "send-back": "the cut gradient the label party sends back",
    "upload": "an HFL client's upload (its gradient or model update)",
}
"""Where a defence acts, in protocol order."""

FEATURE_POINTS = ("input", "activations", "received-gradient", "feature-loss")
"""The feature party's points: its `--defence`."""
LABEL_POINTS = ("labels", "label-layers", "send-back")
"""The label party's points: its `--send-back` (named after its first point; it takes all of the label party's)."""
SPLIT_POINTS = (*FEATURE_POINTS, *LABEL_POINTS)

FLAGS: dict[str, str] = {**{p: "--defence" for p in FEATURE_POINTS}, **{p: "--send-back" for p in LABEL_POINTS},
                         "upload": "--defence"}
"""The one flag that takes a defence at each point (split commands: the feature party's --defence, the label
party's --send-back, whichever of its points a defence acts at; `splitlab hfl`: --defence, the client's upload)."""

NEEDS: dict[str, str] = {
    "train-images": "the feature party's training inputs (to calibrate itself)",
    "binary-task": "a binary task (two classes)",
    "flat-input": "a bottom model that takes a flat input (its input size changes)",
    "image-input": "image inputs (channels, height, width)",
    "label-model": "a label party with a model to train (not --top none)",
    "labels-sent": "a feature party that sends each round's labels with its activations (in process, one feature "
                   "party; not over TCP, not --parties above 1)",
}


@dataclass(frozen=True, kw_only=True)
class DefenceSettings(Validated):
    """Base of a defence's settings: frozen, keyword-only, each option an `option(...)` field checked when built.
    A field without a default is a required option."""


@dataclass(frozen=True)
class Where:
    """What a defence is built for: the task it meets (what the point's party knows)."""
    input_shape: tuple[int, ...] | None = None
    """One example's shape where the defence acts (after the defences before it at the input; at the label party's
    points, the activations it receives)."""
    classes: int | None = None
    flat_input: bool | None = None
    """Whether the bottom model takes a flat input of any size (mlp, small-mlp)."""
    train_images: torch.Tensor | None = None
    """The feature party's training inputs (its strip), for a defence that calibrates itself."""
    label_model: bool | None = None
    """Whether the label party has a model to train (False: `--top none`)."""
    labels_sent: bool | None = None
    """Whether the feature party sends each round's labels with its activations (False: over TCP, where the label
    party holds them, or with several feature parties)."""


@dataclass(frozen=True)
class DefenceSpec:
    name: str
    point: str
    """Where it acts (`POINTS`)."""
    title: str
    """One line: what it does."""
    paper: str
    settings: type
    """A frozen dataclass on `DefenceSettings` whose `option(...)` fields are its options."""
    build: Callable[[Any, Where], Any]
    """`build(settings, where)`: the hook object for the point (see the module docstring)."""
    example: str
    """A spec a user can type (`marvell:scale=1`), shown in errors and docs."""
    needs: tuple[str, ...] = ()
    """What it needs of the task (`NEEDS`); the registry refuses a task without it, in one line."""
    zero: Mapping[str, Any] | None = None
    """Options at which it is no defence, bit for bit (None: it has no strength to turn down, e.g. a transform)."""
    fits: Callable[[Any, Where], None] | None = None
    """Further checks against the task (a patch size dividing the image), raising a one-line `SplitlabError`."""
    reshapes: Callable[[Any, tuple[int, ...]], tuple[int, ...]] | None = None
    """Input defences that change one example's shape: the shape after it."""
    deviations: tuple[Deviation, ...] = ()
    strengths: tuple[Mapping[str, Any], ...] = field(default=())
    """Options of growing strength, for grids and the docs (the paper's where it gives some); every one sets the
    same one option, its `strength` (the axis `splitlab matrix` sweeps)."""

    def __post_init__(self) -> None:
        where = f"defence spec {self.name!r}"
        if not isinstance(self.name, str) or not self.name or self.name != self.name.lower() or ":" in self.name \
                or "+" in self.name or "," in self.name:
            raise SplitlabError(f"{where}: name must be a non-empty lower-case word without ':', '+' or ','")
        if self.point not in POINTS:
            raise SplitlabError(f"{where}: point must be one of {', '.join(POINTS)}, got {self.point!r}")
        if not (isinstance(self.settings, type) and issubclass(self.settings, DefenceSettings)):
            raise SplitlabError(f"{where}: settings must be a DefenceSettings dataclass")
        unknown = [n for n in self.needs if n not in NEEDS]
        if unknown:
            raise SplitlabError(f"{where}: needs {unknown[0]!r} is not one of {', '.join(NEEDS)}")
        if not callable(self.build):
            raise SplitlabError(f"{where}: build must be callable as build(settings, where)")
        for name in ("zero", *(f"strengths[{i}]" for i in range(len(self.strengths)))):
            values = self.zero if name == "zero" else self.strengths[int(name[10:-1])]
            if values is not None:
                try:
                    self.settings(**values)
                except (SplitlabError, TypeError) as exc:
                    raise SplitlabError(f"{where}: its {name} options are refused by its settings ({exc})") from None
        if len({tuple(sorted(values)) for values in self.strengths}) > 1 or any(len(v) != 1 for v in self.strengths):
            raise SplitlabError(f"{where}: its strengths must each set the same one option (its strength axis)")

    @property
    def party(self) -> str:
        return "the label party" if self.point in LABEL_POINTS else \
            "the HFL client" if self.point == "upload" else "the feature party"

    @property
    def strength(self) -> str | None:
        """The option its declared strengths vary (None: it declares none, e.g. a transform that is on or off)."""
        return next(iter(self.strengths[0])) if self.strengths else None

    @property
    def flag(self) -> str:
        return FLAGS[self.point]

    def options(self) -> list:
        """(field, Option) of each option, in declaration order."""
        return options_of(self.settings)

    def checked(self, key: str, value: Any) -> Any:
        """`value` checked as option `key` ("defence patch-orthogonal: patch=3.5 is not an integer"), for code that
        builds the defence's hook without its settings."""
        check = next(opt.check for f, opt in self.options() if f.name == key)
        return check(f"defence {self.name}", value, key)

    def required(self) -> list[str]:
        return [f.name for f, _ in self.options() if _no_default(f)]


def _no_default(f) -> bool:
    return f.default is MISSING and f.default_factory is MISSING

