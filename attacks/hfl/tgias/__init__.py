"""TGIAs-RO: gradient inversion from T temporal gradients of the same batch, with robust aggregation.

`attack.py` is Algorithm 1 and the joint form (Eq. 5); `temporal.py` the temporal simulator and match,
`aggregators.py` the robust aggregators, `label_optimisation.py` Step I, `trace.py` and `observation.py`
the FL trace the server logs and its options.
"""
from attacks.hfl.tgias import observation
from attacks.hfl.tgias.attack import TGIAsRO
from attacks.hfl.tgias.settings import TGIAsSettings
from attacks.spec import AttackSpec, Preset

__all__ = ["SPEC", "TGIAsRO", "TGIAsSettings"]

SPEC = AttackSpec(
    name="tgias-ro", setting="hfl",
    title="TGIAs-RO: temporal gradient inversion with robust aggregation over a trace of FL rounds",
    paper="Li et al. Temporal Gradient Inversion Attacks with Robust Optimization (TGIAs-RO)",
    observes=("rounds",), settings=TGIAsSettings, attack=TGIAsRO, default="tgias-ro.quick",
    labels=("recovered", "known"), observation_options=observation.TraceOptions, observe=observation.observe,
    check=observation.check,
    presets=(
        Preset("tgias-ro.paper", "TGIAs-RO App. C.3: T = 10, coordinate-wise median, linear layer ramp, L-BFGS lr "
                                 "1, R_l = one step of max_iter 20, R_g = 300 (dlg.original's budget per copy)"),
        Preset("tgias-ro.quick", "ours: the joint form (Eq. 5), T = 10, 20 L-BFGS steps of max_iter 20 (400 "
                                 "iterations), uniform layer weights",
                                 {"aggregator": "joint", "iterations": 20, "ramp": False}),
    ),
)
