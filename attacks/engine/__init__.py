"""The one reconstruction engine: variables, simulator, match, priors, optimiser with hooks, a schedule
of blocks, and trials run together along a leading dimension.

    from attacks.engine import Objective, Block, Schedule, run
"""
from attacks.engine.lbfgs import BatchedLBFGS
from attacks.engine.loop import Block, Consensus, EngineResult, Schedule, auto_mode, run
from attacks.engine.matches import L1, Cosine, MeanSquared, SquaredL2, Sum, TopMagnitude
from attacks.engine.matches import GlobalTopMagnitude, subset_of
from attacks.engine.priors import activation_l1
from attacks.engine.simulators import Simulated
from attacks.engine.objective import Objective, Prior
from attacks.engine.optim import LBFGS, SGD, Adam, BoxClamp, GradientBlend, Hook, SignedGradients, StepDecay
from attacks.engine.priors import ActivationL1, BNStatistics, l2, tv_l1, tv_squared
from attacks.engine.simulators import CutActivations, FedAvgUpdate, FedSGDGradient, parameter_leaves, task_loss
from attacks.engine.interpolation import Bound, Replication, epoch_problem, interpolated_path, plan_replication
from attacks.engine.layer_weights import EnhancedSquaredL2, LayerGroups, enhancement_counts, ramp

__all__ = [
    "Objective", "Prior", "Block", "Schedule", "run", "auto_mode", "EngineResult", "BatchedLBFGS",
    "SquaredL2", "L1", "Cosine", "MeanSquared", "Sum", "TopMagnitude",
    "Adam", "SGD", "LBFGS", "StepDecay", "Hook", "SignedGradients", "BoxClamp", "GradientBlend",
    "tv_l1", "tv_squared", "l2", "BNStatistics", "ActivationL1",
    "FedSGDGradient", "FedAvgUpdate", "CutActivations", "task_loss", "parameter_leaves",
    "Bound", "Replication", "epoch_problem", "interpolated_path", "plan_replication",
    "EnhancedSquaredL2", "LayerGroups", "enhancement_counts", "ramp",
    "GlobalTopMagnitude", "subset_of", "activation_l1", "Simulated",
    "Consensus",
]
