"""The attack commands of `splitlab`."""
from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the attack commands to the `splitlab` app."""
