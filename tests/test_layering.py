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
    (`attacks/split/labels/`, the label attacks' shared victim and experiment; `attacks/split/poisoning/`, the
    backdoors' trigger, gradient replacement and experiment) is shared, like `attacks/hfl/fedavg.py`: it imports the
    lab directly, and the attacks take what they need of it through the kit."""
    from attacks.registry import BUILTIN

    modules = {ref.split(":")[0] for table in BUILTIN.values() for ref in table.values()}
    return sorted(ROOT.joinpath(*m.split(".")) for m in modules)


ATTACK_PACKAGES = _attack_packages()


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _lab_imports(path: Path):
    """(module, line) of every import of `path`, at any depth (in functions, under TYPE_CHECKING) and relative ones
    resolved; `from package import name` is the submodule where `name` is one."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                is_module = (ROOT.joinpath(*sub.split(".")).with_suffix(".py").is_file()
                             or (ROOT.joinpath(*sub.split(".")) / "__init__.py").is_file())
                yield (sub if is_module else base), node.lineno


@pytest.mark.parametrize("package", ATTACK_PACKAGES, ids=lambda p: p.name)
def test_every_attack_imports_the_lab_only_through_the_kit(package):
    """The kit is the only door: an attack's folder imports `attacks.kit` and its own modules, nothing else of the
    lab, so what a plug-in can import is what the lab's own attacks use, and loading one attack's spec loads no
    other attack (what two attacks share is in the kit)."""
    own = ".".join(package.relative_to(ROOT).parts)
    through = [f"{path.relative_to(ROOT)}:{line} imports {name}"
               for path in sorted(package.rglob("*.py"))
               for name, line in _lab_imports(path)
               if name.split(".")[0] in ("attacks", "vfl") and name != "attacks.kit"
               and not (name == own or name.startswith(own + "."))]
    assert not through, through


CONTRACT = {"attacks.kit", "attacks.spec", "attacks.spec_parts", "attacks.spec_checks", "attacks.hooks",
            "attacks.driver", "attacks.registry", "attacks.result", "attacks.settings", "attacks.split.experiment"}
"""The attack contract: what every attack is declared, checked, run and scored by."""


def _import_graph() -> dict[str, set[str]]:
    """module -> the modules of attacks/ and vfl/ it imports (the kit's names loaded when taken are its imports under
    TYPE_CHECKING, so they count)."""
    files = {_module(path): path for package in ("attacks", "vfl") for path in (ROOT / package).rglob("*.py")}
    return {m: {name for name, _ in _lab_imports(path) if name in files and name != m} for m, path in files.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, or of one importing itself (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_contract_and_the_engine_are_in_no_import_circle():
    """The contract (spec, its parts and checks, hooks, driver, registry, result, settings, the kit, the split
    config) and the engine import one way, counting imports inside functions and under TYPE_CHECKING: no module of
    theirs reaches itself back through attacks/ or vfl/."""
    import sys

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    graph = _import_graph()
    core = [c for c in _circles(graph) if any(m in CONTRACT or m.startswith("attacks.engine") for m in c)]
    assert core == [], core
    assert "attacks.registry" not in graph["attacks.driver"] | graph["attacks.split.experiment"], \
        "the generic contract never looks an attack up by name"


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_attack_packages_are_the_registrys_folders_and_shared_parts_are_not_among_them():
    assert all((p / "__init__.py").is_file() for p in ATTACK_PACKAGES), ATTACK_PACKAGES
    names = {p.name for p in ATTACK_PACKAGES}
    assert {"dlg", "unsplit", "fsha", "label_norm", "label_completion", "bli", "gr_backdoor"} <= names
    assert not {"labels", "poisoning"} & names


def test_every_name_the_kit_offers_is_there():
    import attacks.kit as kit

    assert [name for name in kit.__all__ if not hasattr(kit, name)] == []
    assert set(kit.LAZY) <= set(kit.__all__) and kit.LAZY["label_answer"] == "attacks.split.labels.answer:answer"


@pytest.mark.slow
def test_the_kit_loads_a_settings_parts_only_when_they_are_taken():
    """Importing the kit loads what every spec loads anyway; an HFL name loads no split-learning module (a fresh
    interpreter: torch's import is most of its time)."""
    import os
    import subprocess
    import sys

    code = ("import sys\nimport attacks.kit as kit\nbare = sorted(m for m in sys.modules if m.startswith("
            "('attacks.hfl', 'attacks.split', 'attacks.driver', 'vfl.protocol', 'vfl.training')))\n"
            "kit.FedSGDObservation\nprint(bare, sorted(m for m in sys.modules if m.startswith('attacks.split')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] []"
