"""What the lab calls on an attack, as `typing.Protocol`s: the attack object and each optional hook of its spec,
with the arguments exactly as the lab passes them. A spec is checked against these when it loads
(`attacks.spec.AttackSpec`): a hook that cannot take its arguments is refused there, naming it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Protocol, runtime_checkable

if TYPE_CHECKING:
    from attacks.engine.options import EngineOptions
    from attacks.result import Reconstruction
    from vfl.runs import Run

__all__ = ["Attack", "HFLAttack", "LabelAttack", "ObserveHook", "DiagnosticsHook", "EvaluateHook", "WriteHook", "ConfigureHook",
           "CheckHook", "HOOK_ARGUMENTS"]


@runtime_checkable
class Attack(Protocol):
    """The attack object, `spec.attack(settings)`. The lab calls it once per run, through the one driver."""
    settings: Any
    """The settings it was built with (the spec's settings class)."""

    def __call__(self, observation: Any, *, seed: int, engine: "EngineOptions") -> "Reconstruction":
        """Reconstruct from `observation` (one of the kinds the spec `observes`; ground truth never enters).

        `seed` seeds every random draw of the attack (its dummy start, its restarts). `engine` says how the engine
        runs the trials (mode, compiling, progress bar): pass it whole to `attacks.engine.run` (or, for an
        attack with its own loop, draw progress with `engine.bar(total)`); never read it. Return one
        `Reconstruction` on the [0,1] scale. A split attack may take more keywords its experiment passes."""


@runtime_checkable
class HFLAttack(Attack, Protocol):
    """An HFL attack object: an `Attack` that can also refuse an observation before it runs."""

    def check(self, observation: Any) -> None:
        """Refuse, with a one-line `SplitlabError`, an observation that lacks what the attack needs
        (`attacks.kit.check_requirements`). Called by the HFL experiment before anything is written."""


@runtime_checkable
class LabelAttack(Attack, Protocol):
    """A label-inference attack object (`splitlab attack label-*`): an `Attack` on what the feature party has
    (`attacks.split.labels.observation.LabelObservation`) that says what that is and refuses a victim it does not
    fit. It may also have `local_optimizer(params, lr)`, the party's own optimiser in training (Fu et al.'s
    malicious one)."""

    @property
    def needs(self) -> Any:
        """What the experiment gives the attacking party (`attacks.split.labels.observation.Needs`): the gradients
        it received, the activations it sent, its own bottom model, a few labelled samples."""

    def check_victim(self, victim: Any) -> None:
        """Refuse, with a one-line `SplitlabError`, a victim (`vfl.case.SplitCase`, over the label attacks'
        defaults) the attack does not fit (a multi-class task for norm scoring); called before anything is loaded or
        written."""


class ObserveHook(Protocol):
    def __call__(self, config: Any, model: Any, data: Any, defence: Any, reveal: bool, settings: Any,
                 observation_options: Any) -> tuple[Any, dict[str, Any]]:
        """Build the observation instead of the experiment's one upload (TGIAs-RO's trace of rounds).

        `config` is the `HFLConfig`; `model` the global model (an `nn.Module`); `data` the train split
        (`vfl.data.ImageData`); `defence` the client's upload defence; `reveal` whether the server knows the
        labels; `settings` the attack's settings; `observation_options` the spec's `observation_options`
        instance. Returns (observation, facts for metrics.json)."""


class DiagnosticsHook(Protocol):
    def __call__(self, observation: Any, settings: Any) -> dict[str, Any]:
        """Facts of the observation for metrics.json, known before the attack runs (they may read what only the
        evaluation knows, never the attack)."""


class EvaluateHook(Protocol):
    def __call__(self, reconstruction: "Reconstruction", metrics: dict[str, Any], truth: "Truth") -> dict[str, Any]:
        """Evaluation-only additions to metrics.json, after scoring (`truth` holds the private side)."""


class WriteHook(Protocol):
    def __call__(self, run: "Run", outcome: "Outcome") -> None:
        """Extra files and figures, after the driver's own: write each through `run.file(name)`,
        `run.save_figure(name, figure)` or `run.write_json(name, obj)`, inside the run directory (files written
        anywhere else are dropped)."""


class ConfigureHook(Protocol):
    def __call__(self, settings: Any, config: Any) -> Any:
        """Settings that depend on the experiment (Inverting Gradients' TV weight per dataset); returns settings."""


class CheckHook(Protocol):
    def __call__(self, config: Any, settings: Any, observation_options: Any) -> None:
        """Rules between the attack's settings, its observation options and the experiment, checked before anything
        is loaded or written: raise a one-line `SplitlabError`."""


HOOK_ARGUMENTS: Mapping[str, tuple[type, int]] = {
    "observe": (ObserveHook, 7), "diagnostics": (DiagnosticsHook, 2), "evaluate": (EvaluateHook, 3),
    "write": (WriteHook, 2), "configure": (ConfigureHook, 2), "check": (CheckHook, 3),
}
"""Each hook of a spec: its protocol and how many positional arguments the lab passes."""
