"""FedLeak: partial gradient matching and gradient regularisation."""
from attacks.hfl.fedleak.attack import FedLeak
from attacks.hfl.fedleak.settings import FedLeakSettings
from attacks.spec import AttackSpec, Deviation, Preset

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
    model="convnet",
    smoke={"iterations": 5},
    deviations=(
        Deviation("model and data", "ResNet10 pretrained on ImageNet, on CIFAR-10, ImageNet and medical images at "
                  "batch 16", "a width-16 ConvNet from random weights on mnist5k digits at batch 8",
                  "CPU time: the paper's ResNet10 takes about 28 min per 1,000 iterations here"),
        Deviation("learning rate and iterations", "Adam 1e-4, 10,000 iterations", "Adam 0.1, 600 iterations",
                  "at 1e-4 the pixels barely move within a CPU budget", ("fedleak.quick",)),
        Deviation("probe step k", "not given", "0.01 (in pixel units)", "the paper never gives it"),
        Deviation("labels", "its column-sum rule", "the counting rule by default (--label-rule fedleak: the paper's)",
                  "mnist5k batches repeat labels; the paper's argsort assumes distinct ones"),
        Deviation("answer", "the last iterate (Alg. 1)", "the lowest-loss iterate by default (--answer final: "
                  "the paper's)", "the lab's convention for restart attacks"),
        Deviation("loss balance", "alpha 1e-5 (TV) and beta 1e-4 (activations) against the L1 over ResNet10's "
                  "selected entries (4.9M parameters)", "the same alpha and beta against an L1 summed over the "
                  "ConvNet's 66,170, so their weight relative to it is about 70 times the paper's; TV is the mean "
                  "form", "the paper states the weights, not the scale they assume (--l1-mean gives the mean L1)"),
    ),
)
