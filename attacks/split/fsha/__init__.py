"""FSHA, the Feature-Space Hijacking Attack: a malicious server hijacks the client's feature space and decodes
its private images.

`attack.py` is the malicious server; `networks.py` its pilot, decoder and critic; `settings.py` its settings and
presets; `evaluation.py` the ground-truth measures and figures. The honest client, its session with the server and
the experiment that runs one attack end to end are the victim's side (`attacks.split.session`, through the kit).
"""
from attacks.kit import AttackSpec, Deviation, Preset, fsha_experiment
from attacks.split.fsha import evaluation
from attacks.split.fsha.attack import FSHA, FshaObservation
from attacks.split.fsha.settings import FshaSettings

__all__ = ["SPEC", "FSHA", "FshaSettings", "FshaObservation"]

SPEC = AttackSpec(
    name="fsha", setting="split",
    title="FSHA: a malicious server returns gradients that hijack the client's features into its own decodable "
          "feature space",
    paper="Pasquini, Ateniese, Bernaschi. Unleashing the Tiger: Inference Attacks on Split Learning. CCS 2021; as "
          "the JAST paper (arXiv 2412.11689) runs it",
    observes=("session",), settings=FshaSettings, attack=FSHA, default="fsha.quick",
    evaluate=evaluation.evaluation, write=evaluation.write_outputs,
    experiment=fsha_experiment,
    presets=(
        Preset("fsha.paper", "FSHA code hparams kept by JAST: level 4, 3000 iterations (JAST Figure 5), batch 64, "
                             "Adam 1e-5/1e-5/1e-4, WGAN-GP 500"),
        Preset("fsha.paper-fashion", "JAST notebook fsha(5000, ...): Fashion-MNIST, 5000 iterations",
               {"iterations": 5000}, experiment={"dataset": "fashion-mnist"}),
        Preset("fsha.quick", "ours: 1000 iterations, batch 32, quarter width, learning rates x10 (fits a 2-core "
                             "CPU in minutes)",
               {"iterations": 1000, "batch_size": 32, "width": 0.25, "lr_pilot": 1e-4, "lr_discriminator": 1e-3,
                "log_every": 50}, experiment={"lr": 1e-4}),
    ),
    smoke={"iterations": 30, "width": 0.0625, "batch_size": 8, "eval_images": 10, "log_every": 10,
           "lr_pilot": 1e-3, "lr": 1e-3},
    deviations=(
        Deviation("data", "MNIST and Fashion-MNIST (60,000 / 10,000 private and public images)", "mnist5k (4,000 "
                  "private / 1,000 public)", "no download on a fresh machine"),
        Deviation("gradient penalty", "a per-channel norm over H and W (the FSHA code)", "the standard WGAN-GP norm "
                  "over the whole feature (--gp-norm spatial: the code's)", "the standard form; both are settings"),
        Deviation("scale", "3000 iterations, batch 64, full width, Adam 1e-5/1e-5/1e-4",
                  "1000 iterations, batch 32, quarter width, learning rates x10", "minutes on a 2-core CPU",
                  ("fsha.quick",)),
    ),
)
