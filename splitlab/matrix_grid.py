"""A matrix file: tasks x attacks x defences x strengths x seeds, checked whole before any cell runs.

    description = "..."
    seeds = [0, 1, 2]
    attacks = ["label-norm", "label-direction"]          # split attacks (`splitlab attack NAME`)
    defences = ["marvell", "activation-noise"]           # no defence is always run beside them
    [tasks.mnist5k]                                      # a task: the options every cell of it shares
    arch = "small-mlp"
    cut-layer = 1
    [strengths]                                          # optional: other values of a defence's strength option
    marvell = [0.25, 4.0]

Each defence's strength axis is its `DefenceSpec.strengths` (the option they set and its values); `[strengths]`
replaces the values only, each checked against the option's range. A (task, attack) pair is one sweep of
`splitlab attack NAME` (`splitlab.sweep_file.Sweep`): its seeds crossed with the arms (no defence, then each
defence at each strength), the arm given with the flag that takes it (`--defence` or `--send-back`). A pair the
defence matrix refuses (`splitlab.defence_matrix`) is refused in one line (a cell the task cannot run, such as a
binary-only defence on a multiclass task, by its command's own checks before any cell runs), as is an unknown attack, defence or key, or a strength out of its option's range.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Optional

from attacks import registry as attacks
from splitlab.defence_matrix import pair
from splitlab.sweep_file import MAX_CELLS, Cell, Sweep, arg_text, file_error
from vfl.defences import registry as defences
from vfl.defences.spec import FEATURE_POINTS
from vfl.errors import SplitlabError

__all__ = ["Arm", "Matrix", "parse_matrix", "load_matrix", "shipped", "NONE"]

TOP_KEYS = ("description", "seeds", "attacks", "defences", "tasks", "strengths", "search", "paper")
PAPER_KEYS = ("seeds", "tasks", "strengths", "basis")


@dataclass(frozen=True)
class Arm:
    """One defence at one strength (or no defence): what a cell's --defence / --send-back say."""
    defence: str
    strength: Optional[str] = None
    value: Any = None
    point: Optional[str] = None

    @property
    def text(self) -> str:
        """The chain a command takes (`marvell:scale=1`, `orthogonal`, `none`)."""
        if self.strength is None:
            return self.defence
        return f"{self.defence}:{self.strength}={arg_text(self.value)}"

    @property
    def flag_options(self) -> dict[str, str]:
        """The cell's defence options: the arm at its party's flag, the other party's none."""
        feature = self.point in FEATURE_POINTS
        return {"defence": self.text if feature else "none", "send-back": "none" if feature else self.text}

    @property
    def label(self) -> str:
        return "no defence" if self.defence == NONE.defence else self.text


NONE = Arm("none")


@dataclass
class Matrix:
    name: str
    source: str
    description: str
    seeds: list[int]
    attacks: list[str]
    defences: list[str]
    tasks: dict[str, dict[str, Any]]
    arms: list[Arm]
    text: str = ""
    paper_size: bool = False
    search: dict[str, dict[str, list]] = field(default_factory=dict)
    """attack -> option -> [low, high]: narrower ranges for `--worst-case` (`splitlab.matrix_worst`)."""

    def sweeps(self) -> dict[tuple[str, str], Sweep]:
        """One sweep per (task, attack): the task's options fixed, the seeds crossed with the arms."""
        out = {}
        for task, fixed in self.tasks.items():
            for attack in self.attacks:
                zipped = {key: [arm.flag_options[key] for arm in self.arms] for key in ("defence", "send-back")}
                out[task, attack] = Sweep(name=f"{self.name}-{task}-{attack}", source=self.source,
                                          command=("attack", attack), description=self.description,
                                          fixed=dict(fixed), axes={"seed": list(self.seeds)}, zipped=zipped,
                                          text=self.text, paper_size=self.paper_size)
        return out

    def cells(self) -> list[tuple[str, str, Cell]]:
        return [(task, attack, cell) for (task, attack), sweep in self.sweeps().items() for cell in sweep.cells()]

    @property
    def size(self) -> int:
        return len(self.tasks) * len(self.attacks) * len(self.arms) * len(self.seeds)

    def arm_of(self, cell: Cell) -> Arm:
        swept = dict(cell.swept)
        return next(a for a in self.arms if a.flag_options == {k: swept[k] for k in ("defence", "send-back")})


def _list(source: str, key: str, value: Any, kind: type) -> list:
    if not isinstance(value, list) or not value or not all(isinstance(v, kind) and not isinstance(v, bool)
                                                           for v in value):
        raise file_error(source, f"{key} must be a non-empty list of {kind.__name__}s")
    if len(set(value)) != len(value):
        raise file_error(source, f"{key} lists a value twice")
    return value


def _attack(source: str, name: str) -> str:
    try:
        spec = attacks.spec(name)
    except SplitlabError as exc:
        raise file_error(source, str(exc)) from None
    if spec.setting != "split":
        raise file_error(source, f"attack {name} is a horizontal-FL attack; the matrix runs split attacks "
                                 f"({', '.join(attacks.names('split'))})")
    return name


def _arms(source: str, names: list[str], strengths: dict[str, Any]) -> list[Arm]:
    arms = [NONE]
    for name in names:
        try:
            spec = defences.spec(name)
        except SplitlabError as exc:
            raise file_error(source, str(exc)) from None
        if spec.point not in FEATURE_POINTS and spec.point not in ("labels", "label-layers", "send-back"):
            raise file_error(source, f"defence {name} acts at the {spec.point} point (horizontal FL), not in a "
                                     "split-learning command")
        if spec.strength is None:
            if name in strengths:
                raise file_error(source, f"defence {name} declares no strength option; drop it from [strengths]")
            arms.append(Arm(name, point=spec.point))
            continue
        values = strengths.get(name, [s[spec.strength] for s in spec.strengths])
        for value in _list(source, f"strengths.{name}", values, (int, float)):
            try:                                 # the option's own range and the settings' cross-option rules
                defences.item(f"{name}:{spec.strength}={arg_text(value)}")
            except SplitlabError as exc:
                raise file_error(source, f"strength {value!r} of {name}: {exc}") from None
            arms.append(Arm(name, spec.strength, value, spec.point))
    unknown = sorted(set(strengths) - set(names))
    if unknown:
        raise file_error(source, f"[strengths] names {unknown[0]}, which is not among the defences")
    return arms


def _check_pairs(source: str, matrix: Matrix) -> None:
    """Every (attack, defence) pair is one the defence matrix runs; what a pair needs of the task (--task binary) is
    then checked cell by cell by the command's own checks, against the task's options and the attack's preset."""
    for attack in matrix.attacks:
        for name in matrix.defences:
            found = pair(attack, name)
            if not found.runnable:
                raise file_error(source, f"{attack} x {name} is refused by the defence matrix: {found.how}")


def _tasks(source: str, value: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict) or not value or not all(isinstance(v, dict) for v in value.values()):
        raise file_error(source, "[tasks] must hold at least one table [tasks.NAME] of options")
    for task, fixed in value.items():
        for key in ("seed", "defence", "send-back", "out", "json"):
            if key in fixed:
                raise file_error(source, f"[tasks.{task}] sets {key}; the matrix sets it for every cell")
    return value


def _search(source: str, table: Any, names: list[str]) -> dict[str, dict[str, list]]:
    from splitlab.matrix_worst import search_space

    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise file_error(source, "[search] must hold tables [search.ATTACK] of option = [low, high]")
    for attack, ranges in table.items():
        if attack not in names:
            raise file_error(source, f"[search.{attack}]: {attack} is not among the attacks")
        if not all(isinstance(v, list) and len(v) == 2 for v in ranges.values()):
            raise file_error(source, f"[search.{attack}]: each option takes [low, high]")
        try:
            search_space(attack, ranges)
        except SplitlabError as exc:
            raise file_error(source, str(exc)) from None
    return table


def parse_matrix(text: str, name: str, source: str, paper_size: bool = False) -> Matrix:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise file_error(source, f"not valid TOML ({exc})") from None
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise file_error(source, f"unknown key {unknown[0]!r}; a matrix file has {', '.join(TOP_KEYS)}")
    paper = data.get("paper", {})
    if sorted(set(paper) - set(PAPER_KEYS)):
        raise file_error(source, f"[paper] takes {', '.join(PAPER_KEYS)}")
    if paper_size:
        if not paper:
            raise file_error(source, "it has no [paper] table for --paper-size")
        data = {**data, **{k: v for k, v in paper.items() if k != "basis"}}
    for key in ("seeds", "attacks", "tasks"):
        if key not in data:
            raise file_error(source, f"it needs {key}")
    seeds = _list(source, "seeds", data["seeds"], int)
    names = [_attack(source, a) for a in _list(source, "attacks", data["attacks"], str)]
    chosen = _list(source, "defences", data.get("defences", ["none"]), str)
    chosen = [d for d in chosen if d != "none"]
    strengths = data.get("strengths", {})
    if not isinstance(strengths, dict):
        raise file_error(source, "[strengths] must be a table: defence = [values]")
    matrix = Matrix(name=name, source=source, description=str(data.get("description", "")), seeds=seeds,
                    attacks=names, defences=chosen, tasks=_tasks(source, data["tasks"]),
                    arms=_arms(source, chosen, strengths), text=text, paper_size=paper_size)
    matrix.search = _search(source, data.get("search", {}), names)
    if matrix.size > MAX_CELLS:
        raise file_error(source, f"{matrix.size:,} cells; a matrix may have at most {MAX_CELLS:,}")
    _check_pairs(source, matrix)
    return matrix


def shipped() -> dict[str, str]:
    """The shipped matrices: name -> file text (splitlab/matrices/*.toml)."""
    folder = resources.files("splitlab") / "matrices"
    return {p.name[:-5]: p.read_text() for p in sorted(folder.iterdir(), key=lambda p: p.name)
            if p.name.endswith(".toml")}


def load_matrix(path: Optional[Path], grid: Optional[str], paper_size: bool = False) -> Matrix:
    if (path is None) == (grid is None):
        raise SplitlabError("give a matrix file or --grid NAME (one of: " + ", ".join(shipped()) + ")")
    if grid is not None:
        texts = shipped()
        if grid not in texts:
            raise SplitlabError(f"unknown matrix {grid!r}; choose one of: {', '.join(texts)}")
        return parse_matrix(texts[grid], grid, f"splitlab/matrices/{grid}.toml", paper_size)
    if not Path(path).is_file():
        raise SplitlabError(f"matrix file {path} does not exist")
    return parse_matrix(Path(path).read_text(), Path(path).stem, str(path), paper_size)
