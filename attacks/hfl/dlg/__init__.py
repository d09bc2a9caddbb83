"""DLG and iDLG: match the observed FedSGD gradient with L-BFGS on dummy data (and dummy labels).

`attack.py` reads like the papers' algorithm; `settings.py` holds the settings with their sources.
"""
from attacks.hfl.dlg.attack import DLG
from attacks.hfl.dlg.settings import DLGSettings
from attacks.kit import AttackSpec, Deviation, Preset

__all__ = ["SPEC", "IDLG_SPEC", "DLG", "DLGSettings"]

SPEC = AttackSpec(
    name="dlg", setting="hfl", title="Deep Leakage from Gradients: L-BFGS on dummy images and dummy labels",
    paper="Zhu, Liu, Han. Deep Leakage from Gradients. NeurIPS 2019",
    observes=("fedsgd",), settings=DLGSettings, attack=DLG, default="dlg.original",
    presets=(
        Preset("dlg.original", "mit-han-lab/dlg main.py: L-BFGS lr 1, 20 inner iterations, 300 steps, summed "
                               "squared differences"),
        Preset("dlg.quick", "ours: 20 L-BFGS steps x 4 restarts (a restart that takes off converges within 8-13 "
                            "steps)",
                            {"iterations": 20, "restarts": 4}),
    ),
    model="lenet",
    smoke={"iterations": 2, "restarts": 1},
    deviations=(
        Deviation("data", "CIFAR-100, SVHN, MNIST and LFW images", "the embedded mnist5k digits (a 5,000-image MNIST "
                  "subset)", "no download on a fresh machine; --dataset mnist or cifar10 once downloaded"),
        Deviation("answer", "the last iterate", "each restart's lowest-loss iterate",
                  "the lab's convention for restart attacks; with one restart and a converged run they agree"),
        Deviation("iterations and restarts", "300 L-BFGS steps, one run", "20 steps x 4 restarts",
                  "a CPU budget; a restart that takes off converges within 8-13 steps", ("dlg.quick",)),
    ),
)

IDLG_SPEC = AttackSpec(
    name="idlg", setting="hfl", title="iDLG: DLG with the label read off the last layer's gradient",
    paper="Zhao, Mopuri, Bilen. iDLG: Improved Deep Leakage from Gradients. arXiv 2001.02610, 2020",
    observes=("fedsgd",), settings=DLGSettings, attack=DLG, default="idlg.original",
    presets=(
        Preset("idlg.original", "PatrickZH/iDLG iDLG.py: as dlg.original with the label read off the last layer's "
                                "gradient",
                                {"labels": "analytic"}),
        Preset("idlg.quick", "ours: 20 L-BFGS steps x 4 restarts",
                             {"labels": "analytic", "iterations": 20, "restarts": 4}),
    ),
    model="lenet",
    smoke={"iterations": 2, "restarts": 1},
    deviations=(
        Deviation("stopping", "stop once the loss is below 1e-6", "no early stop; the lowest-loss iterate is kept",
                  "the same answer at convergence, and one stopping rule for every restart attack"),
        Deviation("iterations and restarts", "300 L-BFGS steps, one run", "20 steps x 4 restarts", "a CPU budget",
                  ("idlg.quick",)),
    ),
)
