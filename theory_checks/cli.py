"""The `splitlab theory` command."""
from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add `theory` to the `splitlab` app."""
