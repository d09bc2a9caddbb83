"""Inverting Gradients: cosine gradient matching with a TV prior, signed Adam, box [0,1], step decay."""
from attacks.hfl.invgrad.attack import InvertingGradients
from attacks.hfl.invgrad.settings import InvGradSettings, for_dataset
from attacks.spec import AttackSpec, Preset

__all__ = ["SPEC", "InvertingGradients", "InvGradSettings"]

SPEC = AttackSpec(
    name="invgrad", setting="hfl", title="Inverting Gradients: cosine gradient matching, TV prior, signed Adam",
    paper="Geiping, Bauermeister, Droege, Moeller. Inverting Gradients: How easy is it to break privacy in "
          "federated learning? NeurIPS 2020",
    observes=("fedsgd", "fedavg"), settings=InvGradSettings, attack=InvertingGradients, default="invgrad.quick",
    labels=("recovered", "known"), configure=for_dataset,
    presets=(
        Preset("invgrad.paper", "JonasGeiping/invertinggradients: cosine, signed Adam 0.1, box, x0.1 at 3/8, 5/8, "
                                "7/8, 24,000 iterations, 8 restarts"),
        Preset("invgrad.quick", "ours: 200 iterations x 2 restarts (recognisable digits on the ConvNet at batch 1)",
                                {"iterations": 200, "restarts": 2}),
    ),
)
