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
