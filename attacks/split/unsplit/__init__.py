"""UnSplit: model inversion plus model stealing by an honest-but-curious server on the cut-layer activations.

`attack.py` reads like the JAST paper's Eqs. 1-2; `settings.py` holds the settings; the experiment that trains or
loads the victim, observes the targets and evaluates per class is the victim's side of the run
(`attacks.split.cut_experiment`, through the kit).
"""
from attacks.kit import AttackSpec, Deviation, Preset, unsplit_evaluation, unsplit_experiment, unsplit_figures
from attacks.split.unsplit.attack import CutObservation, UnSplit
from attacks.split.unsplit.settings import UnsplitSettings

__all__ = ["SPEC", "UnSplit", "UnsplitSettings", "CutObservation"]

SPEC = AttackSpec(
    name="unsplit", setting="split",
    title="UnSplit: a curious server inverts the cut activations while it fits a clone of the client",
    paper="Erdogan, Kupcu, Cicek. UnSplit: Data-Oblivious Model Inversion, Model Stealing, and Label Inference "
          "Attacks Against Split Learning. WPES 2022; as the JAST paper (arXiv 2412.11689) runs it",
    observes=("cut-activations",), settings=UnsplitSettings, attack=UnSplit, default="unsplit.jast",
    evaluate=unsplit_evaluation, write=unsplit_figures, display="minmax", experiment=unsplit_experiment,
    presets=(
        Preset("unsplit.jast", "JAST notebooks and README (github.com/Andron00e/JAST): 200 x (20 input + 20 clone) "
                               "Adam 1e-3 amsgrad steps, lambda_tv 1, lambda_l2 0.1"),
        Preset("unsplit.original", "UnSplit repository defaults (github.com/ege-erdogan/unsplit attacks.py): 1000 x"
                                   " (100 + 100), lambda_tv 0.1, lambda_l2 1",
                                   {"iterations": 1000, "input_steps": 100, "clone_steps": 100, "lambda_tv": 0.1,
                                    "lambda_l2": 1.0}),
        Preset("unsplit.quick", "ours: the jast weights with 50 rounds (2,000 steps per target; a CPU smoke preset)",
                                {"iterations": 50}),
        Preset("unsplit.tabular", "ours, for feature vectors: the jast schedule and lambda_l2 without TV (no "
                                  "neighbouring pixels), a box prior keeping the standardised features to [-3, 3] "
                                  "(lambda_box 1), the dummy input started at 0 (the standardised mean)",
                                  {"lambda_tv": 0.0, "lambda_box": 1.0, "box": 3.0, "init": 0.0}),
    ),
    smoke={"arch": "small-mlp", "epochs": 1, "iterations": 10},
    deviations=(
        Deviation("data", "MNIST and Fashion-MNIST (60,000 training images)", "the embedded mnist5k (4,000 training "
                  "images)", "no download on a fresh machine; --dataset mnist once downloaded"),
        Deviation("iterations", "200 rounds (JAST notebooks)", "50 rounds", "a CPU smoke preset", ("unsplit.quick",)),
        Deviation("data", "images, with a TV prior", "tabular feature vectors: no TV, a box prior on the "
                  "standardised range, scored per feature (MSE per column; for one-hot groups, whether the group's "
                  "argmax is the true category) beside the training mean and the majority category",
                  "the papers run UnSplit on images only; tabular VFL is where vertical FL is used",
                  ("unsplit.tabular",)),
    ),
)
