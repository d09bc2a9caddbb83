"""AWA: the approximate and weighted attack on a FedAvg client's model update.

`attack.py` is Algorithm 2; `attacks.hfl.fedavg` the replication of the local epochs (eqs. 19-20), which AGIC
shares; `match.py` the weighted and enhanced update match (eqs. 23-30), `bo.py` the Bayesian optimisation of Q,
`diagnostics.py` what the evaluation measures beside it.
"""
from attacks.hfl.awa.attack import AWA
from attacks.hfl.awa.diagnostics import evaluation, save_figures
from attacks.hfl.awa.settings import UNWEIGHTED, AWASettings
from attacks.kit import AttackSpec, Deviation, Preset, upload_diagnostics

__all__ = ["SPEC", "AWA", "AWASettings"]

SPEC = AttackSpec(
    name="awa", setting="hfl",
    title="AWA: interpolated replication of the local epochs and a layer-weighted, enhanced update match",
    paper="Song, Wang, Zuazua. Approximate and Weighted Data Reconstruction Attack in Federated Learning. "
          "arXiv 2308.06822",
    observes=("fedavg",), settings=AWASettings, attack=AWA, default="awa.quick", labels=("known",),
    diagnostics=upload_diagnostics, evaluate=evaluation, write=save_figures,
    presets=(
        Preset("awa.paper", "AWA Table I and Section 5: Adam 0.1, 1,000 iterations, BO 50 trials of which 12 random"
                            " over the Table II box",
                            {"bo_trials": 50, "bo_random": 12, "answer": "final"}),
        Preset("awa.quick", "ours: 300 iterations with the paper's case-4 Q (Table III), no BO",
                            {"iterations": 300}),
        Preset("awa.bo-quick", "ours: a reduced BO that fits a 2-core CPU: 16 trials of which 6 random, 300 "
                               "iterations each",
                               {"iterations": 300, "bo_trials": 16, "bo_random": 6}),
        Preset("awa.unweighted", "ours: AWA's replication with every layer weight 1 and no enhancement (the Q "
                                 "ablation)",
                                 {"iterations": 300, "q": UNWEIGHTED}),
        Preset("awa.dlg", "AWA Section 5's DLG baseline: unweighted squared L2 (eq. 10), Adam 0.1, exact replay "
                          "only (no case 4)",
                          {"iterations": 300, "q": UNWEIGHTED, "replication": "exact"}),
    ),
    model="convnet",
    smoke={"iterations": 5},
    deviations=(
        Deviation("model and data", "ResNet-18 on CIFAR-10", "a width-16 ConvNet on mnist5k digits", "CPU time"),
        Deviation("Bayesian optimisation", "a GP with a Gaussian kernel and closed-form expected improvement",
                  "Optuna's GP sampler (Matern 5/2 kernel, log expected improvement)",
                  "a maintained implementation; the kernel is a choice the paper makes for its surrogate"),
        Deviation("answer and f(Q)", "the last iterate (Algorithm 2)", "the lowest-loss iterate (--answer final: "
                  "the paper's)", "the lab's convention for restart attacks",
                  ("awa.quick", "awa.bo-quick", "awa.unweighted", "awa.dlg")),
        Deviation("Q", "found by BO (50 trials, 12 random)", "Table III's case-4 Q, fixed, no BO",
                  "a CPU budget: one run instead of 51", ("awa.quick",)),
        Deviation("BO budget", "50 trials of which 12 random, 1,000 iterations each", "16 trials, 6 random, 300 "
                  "iterations", "a CPU budget", ("awa.bo-quick",)),
        Deviation("iterations", "1,000 Adam steps", "300", "a CPU budget",
                  ("awa.quick", "awa.bo-quick", "awa.unweighted", "awa.dlg")),
    ),
)
