"""The one reconstruction engine: variables, simulator, match, priors, optimiser with hooks, a schedule
of blocks, and trials run together along a leading dimension. It keeps the parts two or more attacks
share; a part only one attack uses lives in that attack's package.

    from attacks.engine import Objective, Block, Schedule, EngineOptions, run
"""
from attacks.engine.compilation import COMPILE_MODES, compile_extras
from attacks.engine.lbfgs import BatchedLBFGS
from attacks.engine.layer_weights import LayerGroups, ramp
from attacks.engine.loop import EngineResult, auto_mode, run
from attacks.engine.options import MODES, QUIET, EngineOptions, EngineReport
from attacks.engine.schedule import Block, Consensus, Schedule
from attacks.engine.matches import (L1, Cosine, MeanSquared, SquaredL2, Sum, Tensors, per_layer_weights, subset_of,
                                    total, weighted_sum)
from attacks.engine.objective import Objective, Prior
from attacks.engine.optim import LBFGS, SGD, Adam, BoxClamp, Hook, SignedGradients, StepDecay
from attacks.engine.priors import BNStatistics, l2, outside_box, tv_l1, tv_squared
from attacks.engine.simulators import (CutActivations, FedAvgUpdate, FedSGDGradient, Simulated, call, parameter_leaves,
                                       recording, task_loss)

__all__ = [
    "Objective", "Prior", "Block", "Schedule", "Consensus", "run", "auto_mode", "MODES", "EngineResult",
    "EngineOptions", "EngineReport", "QUIET",
    "BatchedLBFGS", "SquaredL2", "L1", "Cosine", "MeanSquared", "Sum", "subset_of",
    "Tensors", "per_layer_weights", "total", "weighted_sum",
    "Adam", "SGD", "LBFGS", "StepDecay", "Hook", "SignedGradients", "BoxClamp",
    "tv_l1", "tv_squared", "l2", "outside_box", "BNStatistics",
    "FedSGDGradient", "FedAvgUpdate", "CutActivations", "Simulated", "task_loss", "parameter_leaves", "call",
    "recording",
    "LayerGroups", "ramp", "COMPILE_MODES", "compile_extras",
]
