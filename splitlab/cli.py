"""`splitlab`: assembles the CLI. Each package adds its own commands; imports stay one-way
(`theory_checks -> attacks -> vfl`), so the assembly lives above all three."""
from __future__ import annotations

from attacks.cli import register as register_attacks
from splitlab.sweep import register as register_sweep
from theory_checks.cli import register as register_theory
from vfl.cli import build_app

app = build_app()
register_attacks(app)
register_theory(app)
register_sweep(app)


def main() -> None:
    app()
