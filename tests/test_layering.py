"""Imports go one way: theory_checks -> attacks -> vfl, and splitlab (the CLI, the API, sweeps) above all
three. A module that imports upwards fails here, with the line that does it."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"vfl": {"attacks", "theory_checks", "splitlab", "scripts"},
             "attacks": {"theory_checks", "splitlab", "scripts"},
             "theory_checks": {"splitlab", "scripts"},
             "splitlab": {"scripts"}}


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, node.lineno


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_upward_import(package):
    upward = [f"{path.relative_to(ROOT)}:{line} imports {name}"
              for path in sorted((ROOT / package).rglob("*.py")) for name, line in _imports(path)
              if name.split(".")[0] in FORBIDDEN[package]]
    assert not upward, upward


ATTACK_PACKAGES = sorted(p.parent for p in [*ROOT.glob("attacks/hfl/*/__init__.py"),
                                             *ROOT.glob("attacks/split/*/__init__.py")])


@pytest.mark.parametrize("package", ATTACK_PACKAGES, ids=lambda p: p.name)
def test_no_attack_package_imports_another(package):
    """Each attack's folder is a room of its own: what two attacks share lives beside them (`attacks.hfl.fedavg`,
    `attacks.settings`, the engine), so loading one attack's spec loads no other attack."""
    own = ".".join(package.relative_to(ROOT).parts)
    others = {".".join(p.relative_to(ROOT).parts) for p in ATTACK_PACKAGES} - {own}
    crossing = [f"{path.relative_to(ROOT)}:{line} imports {name}" for path in sorted(package.rglob("*.py"))
                for name, line in _imports(path) if any(name == o or name.startswith(o + ".") for o in others)]
    assert not crossing, crossing
