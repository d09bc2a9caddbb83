"""Everything an attack's author needs, from one module: the spec and its parts, the option declarations, the
settings bases, the result type, the protocols the lab calls (the attack object and each hook, with the arguments
exactly as the lab passes them), the engine, the observation kinds of both settings and their helpers, and the
parts of the lab an attack builds on (the split models, seeded random streams, training a VFL model, the label
attacks' and the backdoors' experiments).

    from attacks.kit import (Adam, AttackSettings, AttackSpec, Block, EngineOptions, FedSGDGradient, Objective,
                             Preset, Reconstruction, Schedule, SquaredL2, check_requirements, engine_context,
                             initial_variables, integer, number, option, recover_labels, run)

This is the only door: a plug-in imports the lab from here, and each of the lab's own attacks imports only this
module and its own folder (tests/test_layering.py). The modules behind these names may move; this surface stays
(docs/extending.md; the observation kinds' fields are in docs/observations.md).

Importing the kit loads what loading any attack's spec loads anyway (the declaration, the options, the settings,
the result, the engine); every other name is imported under `if TYPE_CHECKING:` (so type checkers and readers see
where it comes from) and loads its module when it is first taken (`LAZY`), so an attack loads nothing of the other
setting's: `splitlab hfl --attack dlg` loads no split-learning code.
"""
from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:   # the names loaded when first taken: type checkers read them here, and so does `LAZY`
    # a run's private side and what it returns (evaluate and write hooks), and the run directory
    from attacks.driver import Truth, Outcome
    from vfl.runs import Run, atomic_torch_save
    from attacks.figures import image_grid
    from attacks.metrics import image_mse
    # what an HFL server observes, and what attacks do with it
    from attacks.hfl.observations import (Observation, FedSGDObservation, FedAvgObservation, RoundLog, ModelView,
                                          CAPABILITIES, check_requirements, UploadAttack, upload_needs, observe_fedsgd)
    from attacks.hfl.variables import initial_variables, engine_context
    from attacks.hfl.labels import recover_labels, idlg_labels, count_labels, fedleak_labels, yin_labels
    # FedAvg uploads replicated by the attacker (AWA, AGIC), and images scored along a run
    from attacks.hfl.fedavg import KnownLabelsFedAvg, plan_replication, epoch_problem, upload_diagnostics
    from attacks.hfl.trajectory import (Snapshots, trajectory_option, evaluation as trajectory_evaluation,
                                        save_figure as trajectory_figure)
    # an HFL attack that builds its own observation (TGIAs-RO's trace of rounds): the data, the upload defences,
    # pretraining the global model
    from vfl.data import ImageData
    from vfl.defences.upload import Defence as UploadDefence, NoDefence as NoUploadDefence
    from vfl.hfl_training import pretrain, MAX_EPOCHS as MAX_HFL_EPOCHS
    # a split-learning attack's own experiment (`splitlab attack NAME`)
    from attacks.split.experiment import Experiment, SplitConfig
    # an attack's own experiment that trains the VFL model through the protocol (feature inference from predictions):
    # the training and its data (the case records its parties' columns), the device, the one driver's attack-and-score, a per-feature score
    from vfl.training import TrainConfig, load_data, train_split, training_curves_figure
    from vfl.data import require as require_data
    from vfl.runtime import resolve_device
    from attacks.driver import attack_and_score
    from attacks.metrics.scoring import feature_mse
    # what a split-learning attacker observes
    from attacks.split.observations import CutObservation, observe_cut, FshaObservation
    from attacks.split.labels.observation import LabelObservation, GradientRecord
    # a backdoor by a poisoning feature party: its attack object, config and settings, the backdoors' experiment
    # (the poisoned victim trained beside the unpoisoned one) and its score
    from attacks.split.poisoning.experiment import Backdoor, BackdoorConfig, backdoor_experiment, backdoor_success
    from attacks.split.poisoning.settings import BackdoorSettings, DIGITS_BACKDOOR_VICTIM
    # a label-inference attack: what it needs, its answer, the victims it refuses, the family's experiment and the
    # papers (with the deviations their attacks share)
    from attacks.split.labels.observation import Needs, require as require_observed
    from attacks.split.labels.answer import answer as label_answer
    from attacks.split.labels.victim import require_binary, require_top
    from attacks.split.labels.experiment import LabelConfig
    from attacks.split.labels.family import label_experiment
    from attacks.split.labels.papers import LI, LI_DATA, LI_MODEL, FU, FU_DATA
    # UnSplit's experiment (the case trained or loaded, the targets' activations observed) and its referee's parts
    from attacks.split.cut_experiment import (UNSPLIT as unsplit_experiment, evaluation as unsplit_evaluation,
                                              write_figures as unsplit_figures)
    # FSHA's experiment: the honest client's session with the malicious server, and the referee's parts
    from attacks.split.session.experiment import FSHA_EXPERIMENT as fsha_experiment
    # the split models an attacker knows the architecture of (UnSplit's clones), K feature parties' strips, the
    # protocol's honest client (FSHA's evaluation)
    from vfl.models import arch_spec, build_split
    from vfl.parties import CutLayout, activation_shapes, bottom_model, strip_shape
    from vfl.protocol import Client
    from vfl.defences import report as defence_report   # what a party's own defences did (a detector's verdict)
    # FSHA's model family: the input it takes, the client families, the blocks of the client it hijacks and of its
    # own networks; its image scale and batch stream
    from vfl.models.fsha import (INPUT_SHAPE as FSHA_INPUT_SHAPE, SETUPS as FSHA_SETUPS, ResBlock, Reshape, conv3x3,
                                 deconv3x3, glorot_init_, scaled as scaled_channels)
    from vfl.fsha_victim import BatchStream, from_fsha_images, to_fsha_images


def _taken_when_asked() -> dict[str, str]:
    """name -> "module:name" of every import under `if TYPE_CHECKING:` above: that block is the one list of them."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body
                 if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING")
    return {alias.asname or alias.name: f"{node.module}:{alias.name}" for node in block.body for alias in node.names}


LAZY = _taken_when_asked()
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
