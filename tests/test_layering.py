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


def _attack_packages() -> list[Path]:
    """The folders the registry names an attack's spec in: a folder beside them that no spec lives in
    (`attacks/split/labels/`, the label attacks' shared victim and experiment) is shared, like
    `attacks/hfl/fedavg.py`."""
    from attacks.registry import BUILTIN

    modules = {ref.split(":")[0] for table in BUILTIN.values() for ref in table.values()}
    return sorted(ROOT.joinpath(*m.split(".")) for m in modules)


ATTACK_PACKAGES = _attack_packages()


@pytest.mark.parametrize("package", ATTACK_PACKAGES, ids=lambda p: p.name)
def test_no_attack_package_imports_another(package):
    """Each attack's folder is a room of its own: what two attacks share lives beside them (`attacks.hfl.fedavg`,
    `attacks.settings`, the engine), so loading one attack's spec loads no other attack."""
    own = ".".join(package.relative_to(ROOT).parts)
    others = {".".join(p.relative_to(ROOT).parts) for p in ATTACK_PACKAGES} - {own}
    crossing = [f"{path.relative_to(ROOT)}:{line} imports {name}" for path in sorted(package.rglob("*.py"))
                for name, line in _imports(path) if any(name == o or name.startswith(o + ".") for o in others)]
    assert not crossing, crossing


def test_attack_packages_are_the_registrys_folders_and_shared_parts_are_not_among_them():
    assert all((p / "__init__.py").is_file() for p in ATTACK_PACKAGES), ATTACK_PACKAGES
    names = {p.name for p in ATTACK_PACKAGES}
    assert {"dlg", "unsplit", "fsha", "label_norm", "label_completion"} <= names and "labels" not in names
