"""UnSplit's settings; the presets in the spec (`attacks.split.unsplit`) say where each number comes from."""
from __future__ import annotations

from dataclasses import dataclass

from attacks.kit import EngineSettings, SplitlabError, check_int, check_number, choice, integer, number, option

__all__ = ["UnsplitSettings", "CLONE_MODES"]

CLONE_MODES = ("shared", "per-target")


@dataclass(frozen=True, kw_only=True)
class UnsplitSettings(EngineSettings):
    """The attack's settings (JAST Eqs. 1-2); the presets say where each number comes from."""
    iterations: int = option(200, "outer rounds of input steps, then clone steps.",
                             integer(low=1, high=10_000_000))
    input_steps: int = 20
    """Input steps per round ("input_iters")."""
    clone_steps: int = 20
    """Clone steps per round ("model_iters")."""
    lambda_tv: float = option(1.0, "weight of the squared TV prior.", number(low=0))
    lambda_l2: float = option(0.1, "weight of mean(x^2).", number(low=0))
    lambda_box: float = option(0.0, "weight of the box prior on feature vectors, mean(max(|x| - box, 0)^2) "
                               "(tabular data; 0: off).", number(low=0))
    box: float = option(3.0, "half-width of the box prior: standardised features kept to [-box, box].",
                        number(low=0, low_open=True))
    lr: float = 1e-3
    """Adam learning rate, input and clone (amsgrad)."""
    init: float = 0.5
    """Constant initial value of the dummy input."""
    clone: str = option("per-target", "shared (one clone carried across the targets, as the papers' code) or "
                        "per-target (a clone per target, all targets batched).", choice(CLONE_MODES))

    def check(self) -> None:
        check_int("UnSplit input steps", self.input_steps, low=0, high=10_000_000)
        check_int("UnSplit clone steps", self.clone_steps, low=0, high=10_000_000)
        check_number("UnSplit lr", self.lr, low=0, low_open=True)
        check_number("UnSplit init", self.init)

    def check_features(self, samples: str) -> None:
        """Refuse TV on feature vectors (`samples` names them): TV smooths neighbouring pixels, which they lack.
        Checked where the run is configured (before the victim trains) and again by the attack itself."""
        if self.lambda_tv:
            raise SplitlabError(f"UnSplit's TV prior (lambda_tv {self.lambda_tv:g}) smooths neighbouring pixels; "
                                f"{samples} have none: give --preset unsplit.tabular or --lambda-tv 0")

    @property
    def steps(self) -> int:
        return self.iterations * (self.input_steps + self.clone_steps)
