"""Everything an attack's author needs, from one module: the spec and its parts, the option declarations, the
settings bases, the result type, the observation kinds and their helpers, the engine, and the protocols the lab
calls (the attack object and each hook, with the arguments exactly as the lab passes them).

    from attacks.kit import (Adam, AttackSettings, AttackSpec, Block, EngineOptions, FedSGDGradient, Objective,
                             Preset, Reconstruction, Schedule, SquaredL2, check_requirements, engine_context,
                             initial_variables, integer, number, option, recover_labels, run)

A plug-in imports from here only; the modules behind these names may move, this surface stays
(docs/extending.md; the observation kinds' fields are in docs/observations.md).
"""
from attacks.driver import Outcome, Truth
from attacks.engine import *  # noqa: F401,F403 - the engine's parts are part of the kit, under their own names
from attacks.engine import __all__ as _ENGINE
from attacks.hfl.labels import count_labels, fedleak_labels, idlg_labels, recover_labels, yin_labels
from attacks.hfl.observations import (CAPABILITIES, FedAvgObservation, FedSGDObservation, ModelView, Observation,
                                      RoundLog, UploadAttack, check_requirements, upload_needs)
from attacks.hfl.variables import engine_context, initial_variables
from attacks.hooks import (Attack, CheckHook, ConfigureHook, DiagnosticsHook, EvaluateHook, HFLAttack, LabelAttack,
                           ObserveHook, WriteHook)
from attacks.result import Reconstruction
from attacks.settings import (ITERATIONS, LBFGS_HISTORY, LBFGS_INNER, LBFGS_LR, RESTARTS, AttackSettings,
                              EngineSettings)
from attacks.spec import LABEL_KNOWLEDGE, SETTINGS, AttackSpec, Deviation, Preset, SpecError
from attacks.split.experiment import Experiment, SplitConfig
from vfl.errors import SplitlabError
from vfl.options import Check, checked, choice, integer, number, option, optional, text
from vfl.runs import Run

__all__ = [
    # the declaration
    "AttackSpec", "Preset", "Deviation", "SpecError", "SETTINGS", "LABEL_KNOWLEDGE",
    # options and settings
    "option", "checked", "number", "integer", "choice", "text", "optional", "Check",
    "AttackSettings", "EngineSettings", "ITERATIONS", "RESTARTS", "LBFGS_LR", "LBFGS_INNER", "LBFGS_HISTORY",
    # the contract
    "Attack", "HFLAttack", "LabelAttack", "ObserveHook", "DiagnosticsHook", "EvaluateHook", "WriteHook", "ConfigureHook", "CheckHook",
    "Reconstruction", "Truth", "Outcome", "Run", "SplitlabError",
    # what an HFL server observes, and what attacks do with it
    "Observation", "FedSGDObservation", "FedAvgObservation", "RoundLog", "ModelView", "CAPABILITIES",
    "check_requirements", "UploadAttack", "upload_needs", "initial_variables", "engine_context",
    "recover_labels", "idlg_labels", "count_labels", "fedleak_labels", "yin_labels",
    # a split-learning attack's own experiment (`splitlab attack NAME`)
    "Experiment", "SplitConfig",
    # the engine
    *_ENGINE,
]
