"""The one preset registry: every attack's named settings, with dotted names (`attack.variant`).

Each entry is a factory for the attack's frozen settings and the source of its numbers. `preset(name,
attack)` looks one up; under a given attack the short form is accepted too (`quick` ->
`unsplit.quick` under `attack unsplit`). The table is written out here, not filled by imports.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from attacks.hfl.awa_settings import UNWEIGHTED, AGICSettings, AWASettings
from attacks.hfl.settings import DLGSettings, InvGradSettings
from attacks.hfl.fedleak_settings import FedLeakSettings
from attacks.hfl.tgias_settings import TGIAsSettings
from attacks.split import fsha, unsplit
from vfl.errors import SplitlabError, lookup

__all__ = ["Preset", "PRESETS", "DEFAULT_PRESET", "preset", "settings", "names_for"]


@dataclass(frozen=True)
class Preset:
    name: str
    attack: str
    factory: Callable[[], Any]
    source: str

    def settings(self, **overrides: Any) -> Any:
        """The settings record, with fields replaced where an override is not None."""
        base = self.factory()
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("unsplit.jast", "unsplit", unsplit.jast,
           "JAST notebooks and README: 200 x (20 input + 20 clone) Adam 1e-3 amsgrad steps, lambda_tv 1, lambda_l2 0.1"),
    Preset("unsplit.original", "unsplit", unsplit.original,
           "UnSplit repository defaults (attacks.py): 1000 x (100 + 100), lambda_tv 0.1, lambda_l2 1"),
    Preset("unsplit.quick", "unsplit", unsplit.quick, "ours: the jast weights with 50 rounds (CPU smoke preset)"),
    Preset("fsha.paper", "fsha", fsha.paper,
           "FSHA code hparams kept by JAST: level 4, 3000 iterations (JAST Figure 5), batch 64, Adam 1e-5/1e-5/1e-4, "
           "WGAN-GP 500"),
    Preset("fsha.paper-fashion", "fsha", fsha.paper_fashion, "JAST notebook fsha(5000, ...): Fashion-MNIST, 5000 iterations"),
    Preset("fsha.quick", "fsha", fsha.quick,
           "ours: 1000 iterations, batch 32, quarter width, learning rates x10 (fits a 2-core CPU in minutes)"),
    Preset("dlg.original", "dlg", lambda: DLGSettings("dlg.original"),
           "mit-han-lab/dlg main.py: L-BFGS lr 1, 20 inner iterations, 300 steps, summed squared differences"),
    Preset("dlg.quick", "dlg", lambda: DLGSettings("dlg.quick", steps=20, restarts=4),
           "ours: 20 L-BFGS steps x 4 restarts (a restart that takes off converges within 8-13 steps)"),
    Preset("idlg.original", "idlg", lambda: DLGSettings("idlg.original", labels="analytic"),
           "PatrickZH/iDLG iDLG.py: as dlg.original with the label read off the last layer's gradient"),
    Preset("idlg.quick", "idlg", lambda: DLGSettings("idlg.quick", labels="analytic", steps=20, restarts=4),
           "ours: 20 L-BFGS steps x 4 restarts"),
    Preset("invgrad.paper", "invgrad", lambda: InvGradSettings("invgrad.paper"),
           "JonasGeiping/invertinggradients: cosine, signed Adam 0.1, box, x0.1 at 3/8, 5/8, 7/8, 24,000 iterations, "
           "8 restarts"),
    Preset("invgrad.quick", "invgrad", lambda: InvGradSettings("invgrad.quick", iterations=200, restarts=2),
           "ours: 200 iterations x 2 restarts (recognisable digits on the ConvNet at batch 1)"),
    Preset("awa.paper", "awa", lambda: AWASettings("awa.paper", bo_trials=50, bo_random=12),
           "AWA Table I and Section 5: Adam 0.1, 1,000 iterations, BO 50 trials of which 12 random over the Table II box"),
    Preset("awa.quick", "awa", lambda: AWASettings("awa.quick", iterations=300),
           "ours: 300 iterations with the paper's case-4 Q (Table III), no BO"),
    Preset("awa.bo-quick", "awa", lambda: AWASettings("awa.bo-quick", iterations=300, bo_trials=16, bo_random=6),
           "ours: a reduced BO that fits a 2-core CPU: 16 trials of which 6 random, 300 iterations each"),
    Preset("awa.unweighted", "awa", lambda: AWASettings("awa.unweighted", iterations=300, q=UNWEIGHTED),
           "ours: AWA's replication with every layer weight 1 and no enhancement (the Q ablation)"),
    Preset("awa.dlg", "awa", lambda: AWASettings("awa.dlg", iterations=300, q=UNWEIGHTED, replication="exact"),
           "AWA Section 5's DLG baseline: unweighted squared L2 (eq. 10), Adam 0.1, exact replay only (no case 4)"),
    Preset("agic.paper", "agic", lambda: AGICSettings("agic.paper"),
           "AWA Section 5's AGIC baseline: one combined full-batch step, layer-weighted cosine, Adam 0.1, 1,000 "
           "iterations (weights: ours)"),
    Preset("agic.quick", "agic", lambda: AGICSettings("agic.quick", iterations=300), "ours: agic.paper with 300 iterations"),
    Preset("fedleak.paper", "fedleak", lambda: FedLeakSettings("fedleak.paper"),
           "FedLeak Sec. 5 and Alg. 1: Adam 1e-4, 10,000 iterations, R = 50% global, lambda' 0.7, alpha 1e-5, "
           "beta 1e-4, probe +k grad/||grad|| (k = 0.01, ours), U(0,1) init, labels refined jointly"),
    Preset("fedleak.quick", "fedleak", lambda: FedLeakSettings("fedleak.quick", iterations=600, lr=0.1),
           "ours: fedleak.paper at Adam 0.1 for 600 iterations (lr 1e-4 cannot move a pixel far in a CPU budget)"),
    Preset("tgias-ro.paper", "tgias-ro", lambda: TGIAsSettings("tgias-ro.paper"),
           "TGIAs-RO App. C.3: T = 10, coordinate-wise median, linear layer ramp, L-BFGS lr 1, R_l = one step of "
           "max_iter 20, R_g = 300 (dlg.original's budget per copy)"),
    Preset("tgias-ro.quick", "tgias-ro", lambda: TGIAsSettings("tgias-ro.quick", aggregator="joint", rounds=20,
                                                               ramp=False),
           "ours: the joint form (Eq. 5), T = 10, 20 L-BFGS steps of max_iter 20 (400 iterations), uniform layer "
           "weights (the issue's calibration)"),
)}

DEFAULT_PRESET = {"unsplit": "unsplit.jast", "fsha": "fsha.quick", "dlg": "dlg.original", "idlg": "idlg.original",
                  "invgrad": "invgrad.quick", "awa": "awa.quick", "agic": "agic.quick",
                  "fedleak": "fedleak.quick", "tgias-ro": "tgias-ro.quick"}
"""What a command runs without --preset: the paper's settings where they fit a laptop, else the quick ones."""


def names_for(attack: str) -> list[str]:
    return [name for name, p in PRESETS.items() if p.attack == attack]


def preset(name: str | None, attack: str | None = None) -> Preset:
    """Look a preset up by its dotted name (or, under `attack`, its short name); None gives the default."""
    if name is None:
        name = DEFAULT_PRESET[attack]
    if attack is not None and "." not in name:
        name = f"{attack}.{name}"
    chosen = lookup(PRESETS, name, "preset")
    if attack is not None and chosen.attack != attack:
        raise SplitlabError(f"preset {name} is for attack {chosen.attack}, not {attack}; "
                            f"use --preset {' or '.join(names_for(attack))}")
    return chosen


def settings(name: str | None, attack: str | None = None, **overrides: Any) -> Any:
    """The named preset's settings with overrides (None keeps the preset's value)."""
    return preset(name, attack).settings(**overrides)
