"""`splitlab`: assembles the CLI. Each package adds its own commands; imports stay one-way
(`theory_checks -> attacks -> vfl`), so the assembly lives above all three.

The top-level app is lazy: `splitlab --help`, `-h` and `--version` import no command module (so no
torch, lpips, pytorch-fid or scipy). `COMMANDS` below is a static table of every command, the module
that defines it and its one-line help; a command's module is imported only when that command is
resolved (run). A command's own `--help` is built from `splitlab.help_index` (generated from the commands'
declarations) without importing the command's module, so without torch. tests/test_cli_app.py checks the table
and the index against the commands' real help texts, so neither can drift apart silently.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import typer
from typer._click import exceptions as click_errors  # typer vendors click: its own error classes
from typer.core import TyperCommand, TyperGroup

from vfl.wire.idle_threads import is_wire_party, sleep_when_idle

HELP = "splitlab: attacks and defences for split (vertical) federated learning."
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}  # inherited by every subcommand's context
_HELP_FLAGS = frozenset(CONTEXT_SETTINGS["help_option_names"])


@dataclass(frozen=True)
class LazyCommand:
    """Where a command lives and what `splitlab --help` says about it (without importing it)."""

    module: str
    help: str


COMMANDS: dict[str, LazyCommand] = {
    "train": LazyCommand("vfl.cli", "Train a split model with the explicit client/server protocol and save a "
                         "checkpoint."),
    "evaluate": LazyCommand("vfl.cli", "Re-measure a checkpoint's test accuracy on its dataset (no run directory "
                            "is written)."),
    "models": LazyCommand("vfl.cli", "List every split architecture with its cut layers and client/server/total "
                          "parameter counts, then the horizontal-FL models (whole model on every client)."),
    "datasets": LazyCommand("vfl.cli", "List each dataset, its source and whether it is available here."),
    "defences": LazyCommand("vfl.cli", "List every defence: its point of the protocol, the flag that takes it, its "
                            "options and its paper."),
    "serve": LazyCommand("vfl.wire.cli", "Run the label party (server) of split learning over TCP: admit the "
                         "clients that prove the shared secret, train the top model, record what it received."),
    "client": LazyCommand("vfl.wire.cli", "Run a feature party (client) of split learning over TCP: connect to "
                          "`splitlab serve`, prove the shared secret, train the bottom model on its features."),
    "keys": LazyCommand("vfl.wire.cli", "Write each feature party's own key, derived from the shared secret; party "
                        "k's key proves slot k and no other, so give each party its own file only."),
    "weights": LazyCommand("attacks.weights_cli", "List where the LPIPS and FID pretrained weights are looked for "
                           "and whether they are there; --download fetches them."),
    "compare": LazyCommand("attacks.compare_cli", "Train and attack CNN, MLP and SmallMLP clients (--archs) with UnSplit "
                           "(and FSHA with --attacks unsplit,fsha); write report.md (Table 1 with the paper's "
                           "numbers), report.csv and figures."),
    "hfl": LazyCommand("attacks.hfl.cli", "Gradient inversion by an honest-but-curious HFL server: reconstruct a "
                       "client's batch from its upload."),
    "theory": LazyCommand("theory_checks.cli", "Run the orthogonal-invariance lemmas of JAST through the real "
                          "protocol; exit 0 only if every check matched its expected verdict (holds / breaks), "
                          "1 otherwise, 2 on bad input."),
    "bounds": LazyCommand("theory_checks.cli", "Theorem 1's reconstruction-error bound per attack and round "
                          "against the attacks' mean and best-of-inits errors, with L_R from an unrolled surrogate; "
                          "exit 1 if a mean error exceeds its bound or the FedAvg rate check fails, 2 on bad input."),
    "attack": LazyCommand("attacks.split.cli", "Attacks on a split-learning model."),
    "claims": LazyCommand("splitlab.claims.cli", "How much of each paper the lab reproduces: every headline claim "
                          "with the paper's numbers beside the lab's and a verdict computed from measured runs."),
    "sweep": LazyCommand("splitlab.sweep", "Run a grid of `splitlab` commands (a sweep file or a shipped paper "
                         "grid) on Ray or in process; resumable; writes results.csv, summary.csv (mean, std, n "
                         "over seeds) and report.md."),
    "matrix": LazyCommand("splitlab.matrix", "Benchmark defences against attacks: tasks x attacks x defences x "
                          "strengths x seeds as one resumable sweep; writes report.md, matrix.csv, scores.csv (DCS, "
                          "T-DCS, C-DCS, ranks) and a privacy-utility frontier per task and attack."),
}

_GROUPS: dict[str, TyperGroup] = {}  # module -> its commands as a click group, built on first use


def available_commands() -> list[str]:
    """The command names in help order."""
    return list(COMMANDS)


def module_group(module_name: str) -> TyperGroup:
    """Import `module_name` and return its commands as a click group (cached).

    A module adds its commands with `register(app)`; `vfl.cli`, the bottom layer, builds its app with
    `build_app()` instead."""
    if module_name not in _GROUPS:
        module = importlib.import_module(module_name)
        if hasattr(module, "register"):
            sub = typer.Typer(add_completion=False)
            module.register(sub)
        else:
            sub = module.build_app()
        _GROUPS[module_name] = typer.main.get_group(sub)
    return _GROUPS[module_name]


class LazyCommands(MutableMapping):
    """`group.commands` for the lazy group: the names come from the table (no import), a value is
    built on first access. Code that walks `typer.main.get_command(app).commands` (the sweep's option
    check, typer's "did you mean" suggestions) keeps working and imports only what it looks up."""

    def __init__(self, added: dict[str, Any] | None = None) -> None:
        self._added = dict(added or {})  # commands added directly (`add_command`), not through the table

    def __iter__(self) -> Iterator[str]:
        return iter([*available_commands(), *(n for n in self._added if n not in COMMANDS)])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        return name in self._added or name in available_commands()

    def __getitem__(self, name: str) -> Any:
        if name in self._added:
            return self._added[name]
        if name not in available_commands():
            raise KeyError(name)
        return module_group(COMMANDS[name].module).commands[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._added[name] = command

    def __delitem__(self, name: str) -> None:
        del self._added[name]


class LazyGroup(TyperGroup):
    """A click group that knows its commands from `COMMANDS` and imports one only when it is resolved."""

    _help_stubs = False  # True while the top-level help is rendered: commands are stubs from the table

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands(self.commands)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """As click's, but a usage error (an option's value of the wrong type, an unknown option) is one
        line on stderr with exit code 2, like every other bad input of the lab."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click_errors.NoArgsIsHelpError as exc:         # bare `splitlab attack`: the help, as usual
            exc.show()
            sys.exit(exc.exit_code)
        except click_errors.UsageError as exc:
            where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
            argv = list(kwargs.get("args") or (args[0] if args else None) or sys.argv[1:])
            owner = _owner(exc.option_name, argv) if isinstance(exc, click_errors.NoSuchOption) else ""
            typer.echo(f"error: {exc.format_message()}{owner}{where}", err=True)
            sys.exit(exc.exit_code)
        except click_errors.ClickException as exc:
            typer.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("Aborted.", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)     # typer.Exit(n) comes back as n here

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[Optional[str], Optional[Any], list[str]]:
        """As click's, but a command whose options depend on its arguments (`hfl`: the attack's own) is built
        by its module's `resolve(name, args)` for these arguments."""
        if args and args[0] in COMMANDS and not self._help_stubs:
            if not _HELP_FLAGS.isdisjoint(args[1:]):     # a help: built from the index, without the command's code
                from splitlab import help_index

                indexed = help_index.command(ctx, args[0], list(args[1:]))
                if indexed is not None:
                    return args[0], indexed, list(args[1:])
            module = importlib.import_module(COMMANDS[args[0]].module)
            if hasattr(module, "resolve"):
                return args[0], module.resolve(args[0], list(args[1:])), list(args[1:])
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: Any, cmd_name: str) -> Optional[Any]:
        if cmd_name not in self.commands:
            return None
        if self._help_stubs and cmd_name in COMMANDS:
            return TyperCommand(name=cmd_name, help=COMMANDS[cmd_name].help, callback=None)
        return self.commands[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        # typer's rich help asks `get_command` for each command's help: answer from the table
        self._help_stubs = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._help_stubs = False

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The plain (non-rich) help's command list, from the table."""
        names = self.list_commands(ctx)
        if names:
            limit = formatter.width - 6 - max(map(len, names))
            rows = [(name, TyperCommand(name=name, help=COMMANDS[name].help).get_short_help_str(limit)
                     if name in COMMANDS else self.commands[name].get_short_help_str(limit)) for name in names]
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _owner(flag: str, argv: list[str]) -> str:
    """For an option the named attack lacks but others declare: which attacks' it is (their packages are loaded to
    say so, on this error path only)."""
    if not argv or argv[0] not in ("hfl", "attack") or not flag.startswith("--"):
        return ""
    from attacks import registry
    from attacks.hfl.cli import attack_in
    from vfl.options import flag_of, options_of

    current = (attack_in(argv[1:]) or "dlg") if argv[0] == "hfl" else (argv[1] if len(argv) > 1 else "")
    owners = [s for s in registry.specs() if s.name != current and any(
        flag in (flag_of(f, o), *(o.flag or "").split("/")) for cls in (s.settings, s.observation_options)
        if cls is not None for f, o in options_of(cls))]
    if not owners:
        return ""
    runs = " or ".join(f"`splitlab {'hfl --attack' if s.setting == 'hfl' else 'attack'} {s.name} {flag}`"
                       for s in owners[:3])
    return f": it is an option of {', '.join(s.name for s in owners)}, not of {current} ({runs})"


def version() -> str:
    """splitlab's version: the installed distribution's, else this checkout's pyproject.toml."""
    from importlib import metadata

    try:
        return metadata.version("splitlab")
    except metadata.PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        try:
            return tomllib.loads(pyproject.read_text())["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"splitlab {version()}")
        raise typer.Exit()


app = typer.Typer(cls=LazyGroup, help=HELP, no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False, context_settings=CONTEXT_SETTINGS)


@app.callback()
def _root(
    show_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                      help="Print splitlab's version and exit."),
) -> None:
    pass


def main() -> None:
    if is_wire_party(sys.argv[1:]):         # before torch loads: see vfl/wire/idle_threads.py
        sleep_when_idle()
    app()
