"""Everything an attack's author needs, from one module: the spec and its parts, the option declarations, the
settings bases, the result type, the protocols the lab calls (the attack object and each hook, with the arguments
exactly as the lab passes them), the engine, the observation kinds of both settings and their helpers, and the
parts of the lab an attack builds on (the split models, seeded random streams, the label attacks' experiment).

    from attacks.kit import (Adam, AttackSettings, AttackSpec, Block, EngineOptions, FedSGDGradient, Objective,
                             Preset, Reconstruction, Schedule, SquaredL2, check_requirements, engine_context,
                             initial_variables, integer, number, option, recover_labels, run)

This is the only door: a plug-in imports the lab from here, and each of the lab's own attacks imports only this
module and its own folder (tests/test_layering.py). The modules behind these names may move; this surface stays
(docs/extending.md; the observation kinds' fields are in docs/observations.md).

Importing the kit loads what loading any attack's spec loads anyway (the declaration, the options, the settings,
the result, the engine); every other name loads its module when it is first taken (`LAZY`), so an attack loads
nothing of the other setting's: `splitlab hfl --attack dlg` loads no split-learning code.
"""
from __future__ import annotations

import importlib
from typing import Any

from attacks.engine import *  # noqa: F401,F403 - the engine's parts are part of the kit, under their own names
from attacks.engine import __all__ as _ENGINE
from attacks.hooks import (Attack, CheckHook, ConfigureHook, DiagnosticsHook, EvaluateHook, HFLAttack, LabelAttack,
                           ObserveHook, WriteHook)
from attacks.result import Reconstruction
from attacks.settings import (ITERATIONS, LBFGS_HISTORY, LBFGS_INNER, LBFGS_LR, RESTARTS, AttackSettings,
                              EngineSettings)
from attacks.spec import LABEL_KNOWLEDGE, SETTINGS, AttackSpec, Deviation, Preset, SpecError
from vfl.errors import SplitlabError
from vfl.options import Check, Validated, checked, choice, integer, number, option, optional, text
from vfl.runtime import adam as adam_optimizer
from vfl.runtime import generator, seeded, stream_seed, wait_for
from vfl.validate import check_choice, check_int, check_number

LAZY: dict[str, str] = {
    # a run's private side and what it returns (evaluate and write hooks), and the run directory
    "Truth": "attacks.driver:Truth", "Outcome": "attacks.driver:Outcome", "Run": "vfl.runs:Run",
    "atomic_torch_save": "vfl.runs:atomic_torch_save", "image_grid": "attacks.figures:image_grid",
    "image_mse": "attacks.metrics:image_mse",
    # what an HFL server observes, and what attacks do with it
    "Observation": "attacks.hfl.observations:Observation",
    "FedSGDObservation": "attacks.hfl.observations:FedSGDObservation",
    "FedAvgObservation": "attacks.hfl.observations:FedAvgObservation",
    "RoundLog": "attacks.hfl.observations:RoundLog", "ModelView": "attacks.hfl.observations:ModelView",
    "CAPABILITIES": "attacks.hfl.observations:CAPABILITIES",
    "check_requirements": "attacks.hfl.observations:check_requirements",
    "UploadAttack": "attacks.hfl.observations:UploadAttack", "upload_needs": "attacks.hfl.observations:upload_needs",
    "observe_fedsgd": "attacks.hfl.observations:observe_fedsgd",
    "initial_variables": "attacks.hfl.variables:initial_variables",
    "engine_context": "attacks.hfl.variables:engine_context",
    "recover_labels": "attacks.hfl.labels:recover_labels", "idlg_labels": "attacks.hfl.labels:idlg_labels",
    "count_labels": "attacks.hfl.labels:count_labels", "fedleak_labels": "attacks.hfl.labels:fedleak_labels",
    "yin_labels": "attacks.hfl.labels:yin_labels",
    # FedAvg uploads replicated by the attacker (AWA, AGIC), and images scored along a run
    "KnownLabelsFedAvg": "attacks.hfl.fedavg:KnownLabelsFedAvg",
    "plan_replication": "attacks.hfl.fedavg:plan_replication",
    "epoch_problem": "attacks.hfl.fedavg:epoch_problem", "upload_diagnostics": "attacks.hfl.fedavg:upload_diagnostics",
    "Snapshots": "attacks.hfl.trajectory:Snapshots", "trajectory_option": "attacks.hfl.trajectory:trajectory_option",
    "trajectory_evaluation": "attacks.hfl.trajectory:evaluation",
    "trajectory_figure": "attacks.hfl.trajectory:save_figure",
    # an HFL attack that builds its own observation (TGIAs-RO's trace of rounds): the data, the upload defences,
    # pretraining the global model
    "ImageData": "vfl.data:ImageData", "UploadDefence": "vfl.defences.upload:Defence",
    "NoUploadDefence": "vfl.defences.upload:NoDefence", "pretrain": "vfl.hfl_training:pretrain",
    "MAX_HFL_EPOCHS": "vfl.hfl_training:MAX_EPOCHS",
    # a split-learning attack's own experiment (`splitlab attack NAME`)
    "Experiment": "attacks.split.experiment:Experiment", "SplitConfig": "attacks.split.experiment:SplitConfig",
    # what a split-learning attacker observes
    "CutObservation": "attacks.split.observations:CutObservation",
    "observe_cut": "attacks.split.observations:observe_cut",
    "FshaObservation": "attacks.split.observations:FshaObservation",
    "LabelObservation": "attacks.split.labels.observation:LabelObservation",
    "GradientRecord": "attacks.split.labels.observation:GradientRecord",
    # a label-inference attack: what it needs, its answer, the victims it refuses, the family's experiment and the
    # papers (with the deviations their attacks share)
    "Needs": "attacks.split.labels.observation:Needs",
    "require_observed": "attacks.split.labels.observation:require",
    "label_answer": "attacks.split.labels.answer:answer",
    "require_binary": "attacks.split.labels.victim:require_binary",
    "require_top": "attacks.split.labels.victim:require_top",
    "LabelConfig": "attacks.split.labels.experiment:LabelConfig",
    "label_experiment": "attacks.split.labels.family:label_experiment",
    "LI": "attacks.split.labels.papers:LI", "LI_DATA": "attacks.split.labels.papers:LI_DATA",
    "LI_MODEL": "attacks.split.labels.papers:LI_MODEL", "FU": "attacks.split.labels.papers:FU",
    "FU_DATA": "attacks.split.labels.papers:FU_DATA",
    # the split models an attacker knows the architecture of (UnSplit's clones), K feature parties' strips
    "arch_spec": "vfl.models:arch_spec", "build_split": "vfl.models:build_split",
    "CutLayout": "vfl.parties:CutLayout", "activation_shapes": "vfl.parties:activation_shapes",
    "bottom_model": "vfl.parties:bottom_model", "strip_shape": "vfl.parties:strip_shape",
    "Client": "vfl.protocol:Client",
    # FSHA's model family: the input it takes, the client families, the blocks of the client it hijacks and of its
    # own networks; its image scale and batch stream
    "FSHA_INPUT_SHAPE": "vfl.models.fsha:INPUT_SHAPE", "FSHA_SETUPS": "vfl.models.fsha:SETUPS",
    "ResBlock": "vfl.models.fsha:ResBlock", "Reshape": "vfl.models.fsha:Reshape", "conv3x3": "vfl.models.fsha:conv3x3",
    "deconv3x3": "vfl.models.fsha:deconv3x3", "glorot_init_": "vfl.models.fsha:glorot_init_",
    "scaled_channels": "vfl.models.fsha:scaled", "BatchStream": "vfl.fsha_victim:BatchStream",
    "to_fsha_images": "vfl.fsha_victim:to_fsha_images",
}
"""name -> where it is defined ("module:name"), loaded when first taken."""


def __getattr__(name: str) -> Any:
    where = LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'attacks.kit' has no attribute {name!r}")
    module, attribute = where.split(":")
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value                          # the next lookup is a plain one
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    # the declaration
    "AttackSpec", "Preset", "Deviation", "SpecError", "SETTINGS", "LABEL_KNOWLEDGE",
    # options and settings
    "option", "checked", "number", "integer", "choice", "text", "optional", "Check", "Validated",
    "check_int", "check_number", "check_choice",
    "AttackSettings", "EngineSettings", "ITERATIONS", "RESTARTS", "LBFGS_LR", "LBFGS_INNER", "LBFGS_HISTORY",
    # the contract
    "Attack", "HFLAttack", "LabelAttack", "ObserveHook", "DiagnosticsHook", "EvaluateHook", "WriteHook",
    "ConfigureHook", "CheckHook", "Reconstruction", "SplitlabError",
    # random streams of their own, seeded from the attack's seed; the lab's Adam; a device's queued work
    "stream_seed", "generator", "seeded", "adam_optimizer", "wait_for",
    # loaded when taken
    *LAZY,
    # the engine
    *_ENGINE,
]
