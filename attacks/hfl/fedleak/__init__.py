"""FedLeak: partial gradient matching and gradient regularisation."""
from attacks.hfl.fedleak.attack import FedLeak
from attacks.hfl.fedleak.settings import FedLeakSettings
from attacks.spec import AttackSpec, Preset

__all__ = ["SPEC", "FedLeak", "FedLeakSettings"]

SPEC = AttackSpec(
    name="fedleak", setting="hfl",
    title="FedLeak: partial gradient matching (top-R% entries) with gradient regularisation",
    paper="Fan, Chen, Wang, Zhou. Boosting Gradient Leakage Attacks: Data Reconstruction in Realistic FL "
          "Settings. USENIX Security 2025",
    observes=("fedsgd", "fedavg"), settings=FedLeakSettings, attack=FedLeak, default="fedleak.quick",
    labels=("recovered", "known"), aggregates=True,
    presets=(
        Preset("fedleak.paper", "FedLeak Sec. 5 and Alg. 1: Adam 1e-4, 10,000 iterations, R = 50% global, lambda' "
                                "0.7, alpha 1e-5, beta 1e-4, probe +k grad/||grad|| (k = 0.01, ours), U(0,1) init, "
                                "labels refined jointly"),
        Preset("fedleak.quick", "ours: fedleak.paper at Adam 0.1 for 600 iterations (lr 1e-4 cannot move a pixel "
                                "far in a CPU budget)",
                                {"iterations": 600, "lr": 0.1}),
    ),
)
