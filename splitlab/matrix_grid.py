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
    [cases.mlp-client]                                   # optional: a row that changes the case, not a defence
    arch = "mlp"                                         # (options the tasks set; `tasks` limits where it runs)

Each defence's strength axis is its `DefenceSpec.strengths` (the option they set and its values); `[strengths]`
replaces the values only, each checked against the option's range. A (task, attack) pair is one sweep of
`splitlab attack NAME` (`splitlab.sweep_file.Sweep`): its seeds crossed with the arms (no defence, then each
defence at each strength), the arm given with the flag that takes it (`--defence` or `--send-back`). A pair the
defence matrix refuses (`splitlab.defence_matrix`) is refused in one line (a cell the task cannot run, such as a
binary-only defence on a multiclass task, by its command's own checks before any cell runs), as is an unknown attack, defence or key, or a strength out of its option's range.

A task may run some of the attacks only (`attacks = [...]` in its table: UnSplit reconstructs images, so a tabular
task leaves it out) and give one attack options of its own (a sub-table named after it, `[tasks.mnist5k.unsplit]`:
`iterations` means another thing to label-norm). A case row (`[cases.NAME]`) is an arm with no defence whose cells
change options the task sets (an architecture: JAST's dense client against the CNN it replaces), scored and ranked
beside the defences.
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

TOP_KEYS = ("description", "seeds", "attacks", "defences", "skip", "tasks", "cases", "strengths", "search",
            "paper")
PAPER_KEYS = ("seeds", "tasks", "cases", "strengths", "basis")


@dataclass(frozen=True)
class Arm:
    """One defence at one strength (or no defence): what a cell's --defence / --send-back say."""
    defence: str
    strength: Optional[str] = None
    value: Any = None
    point: Optional[str] = None
    case: tuple[tuple[str, Any], ...] = ()
    """A case row's options (what it changes of the task's case); () for a defence's arm."""
    tasks: Optional[tuple[str, ...]] = None
    """A case row's tasks (None: every task)."""

    @property
    def text(self) -> str:
        """The chain a command takes (`marvell:scale=1`, `orthogonal`, `none`)."""
        if self.strength is None:
            return self.defence
        return f"{self.defence}:{self.strength}={arg_text(self.value)}"

    @property
    def flag_options(self) -> dict[str, str]:
        """The cell's defence options: the arm at its party's flag, the other party's none (a case row: both)."""
        if self.case:
            return {"defence": "none", "send-back": "none"}
        feature = self.point in FEATURE_POINTS
        return {"defence": self.text if feature else "none", "send-back": "none" if feature else self.text}

    @property
    def label(self) -> str:
        return "no defence" if self.defence == NONE.defence else self.text

    def runs_on(self, task: str) -> bool:
        return self.tasks is None or task in self.tasks


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
    skip: frozenset[tuple[str, str]] = frozenset()
    """(attack, defence) pairs the defence matrix refuses that the file leaves out (the rest of the grid runs)."""
    search: dict[str, dict[str, list]] = field(default_factory=dict)
    """attack -> option -> [low, high]: narrower ranges for `--worst-case` (`splitlab.matrix_worst`)."""

    def sweeps(self) -> dict[tuple[str, str], Sweep]:
        """One sweep per (task, attack the task runs): the task's options (and the attack's own there) fixed, the
        seeds crossed with the task's arms; the options a case row changes are zipped with the arms."""
        out = {}
        for task in self.tasks:
            for attack in self.task_attacks(task):
                arms = self.task_arms(task, attack)
                zipped = {key: [self.arm_options(task, attack, arm)[key] for arm in arms]
                          for key in self.arm_options(task, attack, NONE)}
                fixed = {k: v for k, v in self.task_options(task, attack).items() if k not in zipped}
                out[task, attack] = Sweep(name=f"{self.name}-{task}-{attack}", source=self.source,
                                          command=("attack", attack), description=self.description,
                                          fixed=fixed, axes={"seed": list(self.seeds)}, zipped=zipped,
                                          text=self.text, paper_size=self.paper_size)
        return out

    def task_attacks(self, task: str) -> list[str]:
        """The matrix's attacks this task runs (its `attacks`, else all), in the matrix's order."""
        chosen = self.tasks[task].get("attacks", self.attacks)
        return [a for a in self.attacks if a in chosen]

    def task_options(self, task: str, attack: str) -> dict[str, Any]:
        """The attack command's options of the task's cells: the task's own, then the attack's sub-table."""
        table = self.tasks[task]
        shared = {k: v for k, v in table.items() if k != "attacks" and not isinstance(v, dict)}
        return {**shared, **table.get(attack, {})}

    def task_arms(self, task: str, attack: Optional[str] = None) -> list[Arm]:
        """The arms of the task (and of one attack there: less the pairs the file skips)."""
        return [a for a in self.arms if a.runs_on(task) and (attack, a.defence) not in self.skip]

    def arm_options(self, task: str, attack: str, arm: Arm) -> dict[str, Any]:
        """What an arm's cells set: its defence at its party's flag and, where the task has case rows, the options
        they change (a case row's own values; every other arm the task's, or the attack's own there)."""
        changed = dict.fromkeys(k for a in self.task_arms(task) for k, _ in a.case)
        kept = self.task_options(task, attack)
        return {**arm.flag_options, **{k: dict(arm.case).get(k, kept.get(k)) for k in changed}}

    def cells(self) -> list[tuple[str, str, Cell]]:
        return [(task, attack, cell) for (task, attack), sweep in self.sweeps().items() for cell in sweep.cells()]

    @property
    def size(self) -> int:
        return sum(len(self.task_arms(t, a)) for t in self.tasks for a in self.task_attacks(t)) * len(self.seeds)

    def arm_of(self, task: str, attack: str, cell: Cell) -> Arm:
        swept = dict(cell.swept)
        return next(a for a in self.task_arms(task, attack)
                    if all(swept.get(k) == v for k, v in self.arm_options(task, attack, a).items()))


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
    """Every (attack, defence) pair is one the defence matrix runs, or one the file skips that it refuses; what a
    pair needs of the task (--task binary) is then checked cell by cell by the command's own checks, against the
    task's options and the attack's preset."""
    for attack in matrix.attacks:
        for name in matrix.defences:            # (a case row is no defence: its cells are checked as any cell)
            found = pair(attack, name)
            if (attack, name) in matrix.skip:
                if found.runnable:
                    raise file_error(source, f"skip names {attack} x {name}, which the defence matrix runs; skip "
                                             "only a pair it refuses")
            elif not found.runnable:
                raise file_error(source, f"{attack} x {name} is refused by the defence matrix: {found.how} (or "
                                         f"leave the pair out: skip = [[\"{attack}\", \"{name}\"]])")


def _skip(source: str, value: Any, attacks_: list[str], chosen: list[str]) -> frozenset[tuple[str, str]]:
    if not isinstance(value, list) or not all(isinstance(p, list) and len(p) == 2 for p in value):
        raise file_error(source, 'skip must be a list of [attack, defence] pairs, like [["label-direct", "mid"]]')
    for attack, name in value:
        if attack not in attacks_ or name not in chosen:
            raise file_error(source, f"skip names {attack} x {name}; give an attack and a defence of the matrix")
    return frozenset((a, d) for a, d in value)


def _tasks(source: str, value: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict) or not value or not all(isinstance(v, dict) for v in value.values()):
        raise file_error(source, "[tasks] must hold at least one table [tasks.NAME] of options")
    for task, fixed in value.items():
        for key in ("seed", "defence", "send-back", "out", "json"):
            if key in fixed or any(isinstance(v, dict) and key in v for v in fixed.values()):
                raise file_error(source, f"[tasks.{task}] sets {key}; the matrix sets it for every cell")
        chosen = fixed.get("attacks", names)
        if not isinstance(chosen, list) or not chosen or not all(a in names for a in chosen):
            raise file_error(source, f"[tasks.{task}] attacks must be a non-empty list of the matrix's attacks "
                                     f"({', '.join(names)})")
        for key, sub in fixed.items():
            if isinstance(sub, dict) and key not in chosen:
                raise file_error(source, f"[tasks.{task}.{key}]: {key} is not an attack this task runs; a "
                                         "sub-table gives one attack's own options")
    return value


def _cases(source: str, table: Any, tasks: dict[str, dict[str, Any]]) -> list[Arm]:
    """The case rows: each an arm with no defence whose cells change options every task it runs on sets."""
    if not isinstance(table, dict) or not all(isinstance(v, dict) and v for v in table.values()):
        raise file_error(source, "[cases] must hold tables [cases.NAME] of the case options a row changes")
    arms = []
    for name, options in table.items():
        if name == NONE.defence or name in defences.names():
            raise file_error(source, f"[cases.{name}] is named like a defence; give the row another name")
        options = dict(options)
        runs_on = options.pop("tasks", None)
        if runs_on is not None and (not isinstance(runs_on, list) or not runs_on
                                    or not all(t in tasks for t in runs_on)):
            raise file_error(source, f"[cases.{name}] tasks must be a non-empty list of the matrix's tasks "
                                     f"({', '.join(tasks)})")
        if not options:
            raise file_error(source, f"[cases.{name}] changes no option")
        if "attacks" in options:
            raise file_error(source, f"[cases.{name}] changes attacks; a row runs the attacks of its tasks")
        for task in runs_on or list(tasks):
            for key, value in options.items():
                if key not in tasks[task] or isinstance(tasks[task][key], dict):
                    raise file_error(source, f"[cases.{name}] changes {key}, which [tasks.{task}] does not set "
                                             "(a row changes what the task's other arms keep)")
                if isinstance(value, (dict, list)):
                    raise file_error(source, f"[cases.{name}] {key} must be one value")
        arms.append(Arm(name, case=tuple(sorted(options.items())),
                        tasks=None if runs_on is None else tuple(runs_on)))
    return arms


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
    tasks = _tasks(source, data["tasks"], names)
    matrix = Matrix(name=name, source=source, description=str(data.get("description", "")), seeds=seeds,
                    attacks=names, defences=chosen, tasks=tasks,
                    arms=_arms(source, chosen, strengths) + _cases(source, data.get("cases", {}), tasks), text=text,
                    paper_size=paper_size)
    matrix.search = _search(source, data.get("search", {}), names)
    matrix.skip = _skip(source, data.get("skip", []), names, chosen)
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
