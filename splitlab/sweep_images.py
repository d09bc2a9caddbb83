"""Which images a sweep's cell attacked: the train-split indices its run's config.json records (`images`; an
HFL run writes them, whether drawn from `--index` on or by the seed), written as one column of results.csv so
that the ledger can say how many distinct images stand behind a claim. Torch-free: `splitlab claims` reads it.
"""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["IMAGES", "images_of"]

IMAGES = "images"
"""The results.csv column: the attacked images' train-split indices, space-separated ("" where none)."""


def images_of(cell_dir: Path) -> str:
    """The train-split indices a cell's run attacked, from its config.json ("" where it records none)."""
    try:
        found = json.loads((cell_dir / "config.json").read_text()).get("config", {}).get(IMAGES)
    except (OSError, ValueError, AttributeError):
        return ""
    return " ".join(str(int(i)) for i in found) if isinstance(found, list) else ""
