"""DLG's and iDLG's settings, with where every number comes from."""
from __future__ import annotations

from dataclasses import dataclass

from attacks.kit import ITERATIONS, LBFGS_HISTORY, LBFGS_INNER, LBFGS_LR, RESTARTS, EngineSettings, checked, option

__all__ = ["DLGSettings"]


@dataclass(frozen=True, kw_only=True)
class DLGSettings(EngineSettings):
    """Deep Leakage from Gradients (Zhu, Liu, Han, NeurIPS 2019) and iDLG (Zhao, Mopuri, Bilen, 2020).

    Find dummy data x' (and, for DLG, dummy label logits l') whose gradient matches the observed one:

        x'*, l'* = argmin_{x', l'}  sum_layers || grad_theta CE(F(x'; theta), softmax(l')) - g ||^2

    optimised with L-BFGS from x' ~ N(0, 1), l' ~ N(0, 1). iDLG replaces the free labels with the
    label read off the final layer's gradient (argmin of its row sums, exact at batch size 1) and
    optimises x' alone with hard-label CE.

    Sources (the authors' code: mit-han-lab/dlg `main.py`, PatrickZH/iDLG `iDLG.py`): `torch.optim.LBFGS`
    with torch's defaults, lr 1, max_iter 20 inner iterations per step, history 100, no line search; 300
    outer steps; summed squared differences with no 0.5 factor; no prior, no box; randn init; model = the
    sigmoid LeNet with U(-0.5, 0.5) init, inputs in [0,1] unnormalised. iDLG's early stop at loss < 1e-6 is not used (the best iterate is kept instead).
    """
    iterations: int = option(300, "L-BFGS steps, each of up to max_iter inner iterations.", ITERATIONS)
    restarts: int = option(1, "independent restarts; the lowest-loss one is the answer (DLG and iDLG ran one).",
                           RESTARTS)
    lr: float = checked(1.0, LBFGS_LR)
    max_iter: int = checked(20, LBFGS_INNER)
    history_size: int = checked(100, LBFGS_HISTORY)
    labels: str = "joint"
    """joint: optimise label logits with the images (DLG); analytic: iDLG / counting rule."""

    @property
    def attack(self) -> str:
        return "dlg" if self.labels == "joint" else "idlg"
