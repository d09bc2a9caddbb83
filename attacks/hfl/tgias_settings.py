"""Settings of TGIAs-RO, with where every number comes from (presets `tgias-ro.paper`, `tgias-ro.quick` in
`attacks.presets`)."""
from __future__ import annotations

from dataclasses import dataclass

from attacks.hfl.options import Option, choice, flag, integer, negated, number

__all__ = ["TGIAsSettings", "FORMS", "OPTIONS"]

FORMS = ("joint", "mean", "median", "trimmed", "krum")
"""`joint`: Eq. 5 minimised directly; the others: Algorithm 1 with that data-space aggregator."""


@dataclass(frozen=True)
class TGIAsSettings:
    """Temporal Gradient Inversion Attacks with Robust Optimization (Li et al., TGIAs-RO).

    The server holds T gradients g_t = grad_{w_t} L(w_t, D) of the same batch D at the global weights
    w_t of T rounds of a FedSGD trace, and the labels (known, as in the paper's image experiments, or
    found by last-layer label optimisation, Sect. 3.4.1). Per temporal gradient

        f_t(x) = sum_l omega_l || grad_{w_t^l} L(w_t; x, y) - g_t^l ||^2          (Eq. 4, squared L2)

    Two forms:
    - `aggregator="joint"` minimises sum_t alpha_t f_t(x), alpha_t = 1/T (Eq. 5 with the theory's
      uniform weights) with L-BFGS on one x ~ N(0, 1);
    - Algorithm 1 (`mean`, `median`, `trimmed`, `krum`): T copies of x start from the same x ~ N(0, 1);
      every global round s = 1..R_g, copy t takes R_l L-BFGS steps on f_t alone (Step II), then every
      copy is replaced by RobustAgg over the T copies (Step III).

    Sources (paper App. C.3, digest notes/papers/000_tgias_ro.md section 3): T = 10 "first" temporal
    gradients; L-BFGS lr 1; "300 epochs" read as R_g = 300 global rounds; R_l = 20 "LBFGS steps" read
    as one `torch.optim.LBFGS.step` of max_iter 20 (torch's default), which gives each copy the budget
    of `dlg.original` (300 steps x 20 iterations); history 100 (torch's default); median the default
    aggregator; layer weights increasing linearly (Sect. 4.1 (2), after SAPAG and Geiping).

    Choices where the paper is silent (each an option):
    - `ramp`: omega_l = l / L over the model's L layers (a layer = a module with parameters, its weight
      and bias share omega_l), input to output; False: omega_l = 1;
    - `beta` = 0.3 and `krum_f` = 3: the trimmed mean drops 3 of 10 values at each end and Krum
      expects up to 3 invalid of T = 10, both below T/2 as the theory needs;
    - `reset` = True: a fresh L-BFGS state every global round (history carried across the jump to the
      aggregate made the losses blow up to 8e3-8e5 in calibration); False carries it over;
    - the answer of Algorithm 1 is RobustAgg over each copy's best iterate (the lab keeps best iterates,
      as for DLG), which at T = 1 with the mean is exactly iDLG's answer;
    - label optimisation (labels not known): `label_steps` L-BFGS steps (max_iter 20) on dummy last-layer
      features (one set per t) and one shared set of label logits, matching every t's last-layer weight
      and bias gradients, each normalised by its own squared norm; labels = argmax.
    """
    name: str
    temporal: int = 10
    aggregator: str = "median"
    rounds: int = 300
    """R_g: global rounds (for `joint`, R_g x R_l L-BFGS steps in all: the same iterations)."""
    local_steps: int = 1
    """R_l: L-BFGS `.step()` calls per copy per round (each up to `max_iter` inner iterations)."""
    lr: float = 1.0
    max_iter: int = 20
    history_size: int = 100
    ramp: bool = True
    beta: float = 0.3
    krum_f: int = 3
    reset: bool = True
    label_steps: int = 50

    attack = "tgias-ro"
    restarts = 1

    @property
    def iterations(self) -> int:
        return self.rounds * self.local_steps * self.max_iter


OPTIONS = (
    Option("temporal", "temporal", integer(low=1, high=1000), ("tgias-ro",),
           "tgias-ro: temporal gradients T of the target batch (default: the preset's, 10)."),
    Option("aggregator", "aggregator", choice(FORMS), ("tgias-ro",),
           "tgias-ro: joint (Eq. 5) or Algorithm 1 with mean, median, trimmed or krum (default: the preset's)."),
    Option("local_steps", "local_steps", integer(low=1, high=100_000), ("tgias-ro",),
           "tgias-ro: R_l, L-BFGS steps per round (per copy in Algorithm 1; default: the preset's, 1)."),
    Option("layer_ramp", "ramp", flag, ("tgias-ro",),
           "tgias-ro: linearly increasing layer weights or uniform ones (default: the preset's).",
           "--layer-ramp/--uniform-layers"),
    Option("trim_beta", "beta", number(low=0, high=0.5, high_open=True), ("tgias-ro",),
           "tgias-ro trimmed mean: fraction dropped at each end (default 0.3)."),
    Option("krum_f", "krum_f", integer(low=0, high=1000), ("tgias-ro",),
           "tgias-ro Krum: invalid copies it expects (default 3)."),
    Option("carry_state", "reset", negated, ("tgias-ro",),
           "tgias-ro Algorithm 1: keep the L-BFGS state across each aggregation (default: fresh every round)."),
)
"""`splitlab hfl` options that set TGIAs-RO's settings (`attacks.hfl.options`)."""
