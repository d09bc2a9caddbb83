"""Every declared deviation from a paper, gathered for `splitlab claims --deviations` and docs/claims.md: the
deviations of the attacks a paper's claims run (each attack's spec) and of the defences they run (`DEFENCES`), those
of the harness and protocol its claims share (the paper module's `DEVIATIONS`: matching, DP, the clients' BatchNorm,
the images per seed) and, for the bounds paper, those of `splitlab bounds` (`theory_checks.bounds.deviations`).
Imports the registry, hence torch: only on request."""
from __future__ import annotations

from attacks.spec import Deviation
from splitlab.claims import MODULES

__all__ = ["declared"]


def declared(paper: str) -> list[tuple[str, Deviation]]:
    """(where it is declared, the deviation) for one paper's claims."""
    from attacks import registry

    module = MODULES[paper]
    found = [(name, d) for name in module.ATTACKS for d in registry.spec(name).deviations]
    found += [(f"{paper} claims", d) for d in module.DEVIATIONS]
    if getattr(module, "DEFENCES", ()):
        from vfl.defences import registry as defences
        found += [(name, d) for name in module.DEFENCES for d in defences.spec(name).deviations]
    if paper == "bounds":
        from theory_checks.bounds.deviations import DEVIATIONS
        found += [("splitlab bounds", d) for d in DEVIATIONS]
    return found
