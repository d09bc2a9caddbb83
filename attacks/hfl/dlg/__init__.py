"""DLG and iDLG: match the observed FedSGD gradient with L-BFGS on dummy data (and dummy labels).

`attack.py` reads like the papers' algorithm; `settings.py` holds the settings with their sources.
"""
from attacks.hfl.dlg.attack import DLG
from attacks.hfl.dlg.settings import DLGSettings
from attacks.spec import AttackSpec, Preset

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
)
