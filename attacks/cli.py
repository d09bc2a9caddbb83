"""The attack commands of `splitlab`: `hfl`, `attack unsplit`, `attack fsha`, `compare`.

Each attack keeps its command next to its code; this module only wires them into the app.
"""
from __future__ import annotations

import typer

from attacks.compare_cli import register as register_compare
from attacks.hfl.cli import register as register_hfl
from attacks.split.fsha_cli import register as register_fsha
from attacks.split.unsplit_cli import register as register_unsplit


def register(app: typer.Typer) -> None:
    """Add the attack commands to the `splitlab` app."""
    attack = typer.Typer(help="Attacks on a split-learning model.", no_args_is_help=True)
    register_unsplit(attack)
    register_fsha(attack)
    app.add_typer(attack, name="attack")
    register_compare(app)
    register_hfl(app)
