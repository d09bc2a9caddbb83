"""`splitlab train --transport tcp` (and the attacks' `--transport tcp`): both sides of a wire run on this
machine, from one command.

The server runs in this process (so its port is known before any client starts, and its errors are this
command's); each feature party runs `splitlab client` in a process of its own with the same configuration,
its own key (derived from a fresh secret; files only this user can read, removed afterwards) and this
process's torch thread count, so both sides compute exactly what the in-process run computes. K parties are
K processes: a K this machine's memory cannot hold is refused before anything starts (`check_local_parties`).
Each side writes its own run directory inside the train run's: `server/`, `party-0/`, ... The train run then
gets what `train` always writes, built from the sides' final models. `LocalClients` is the part every such
command shares (the secret and keys, the listener, the client processes and their one-line errors);
`serve_locally` runs a split-learning server with it and reads nothing of the clients'.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

import vfl
from vfl.defences import feature_reports
from vfl.errors import SplitlabError
from vfl.fsha_victim import FshaClientConfig
from vfl.parties import Parties
from vfl.protocol import Role
from vfl.runs import Run
from vfl.runtime import resolve_device
from vfl.training import TrainConfig, TrainedSplit, build_parties, load_data
from vfl.wire.client import load_bottom
from vfl.wire.handshake import Listener
from vfl.wire.keys import new_secret, party_key_text, read_secret, write_private
from vfl.wire.server import ServeSettings, load_top, serve
from vfl.wire.tls import TlsFiles, client_context, server_context

STOP_SECONDS = 10.0
GRACE_SECONDS = 5.0
"""How long clients a failed session told to stop may take to end on their own."""
CLIENT_MEMORY = 1 << 30
"""What one client process may take at its peak, rounded up: a small-mlp or cnn client on mnist5k peaked at
0.84 GiB resident (torch itself, the dataset, the model and its optimiser)."""


def check_local_parties(parties: int) -> None:
    """Refuse `parties` client processes on this machine when its available memory cannot hold them."""
    try:
        with open("/proc/meminfo") as fh:
            available = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return                                  # not Linux: nothing to go by
    most = max(1, available // CLIENT_MEMORY)
    if parties > most:
        raise SplitlabError(f"--parties {parties} over TCP starts {parties} client processes of up to "
                            f"{CLIENT_MEMORY / 2**30:g} GiB each; this machine has {available / 2**30:.1f} GiB "
                            f"available, room for {most}; run fewer parties, or in process (--transport local)")


def check_hosted(config: TrainConfig) -> None:
    """Refuse, in one line, a case `splitlab serve` and `splitlab client` cannot host: the label party joins the
    feature parties' activations for its top model (--top model), or sums their class scores (aggVFL: --top none,
    which is --aggregate sum); a label party holding only the output layer (--top linear) runs in process only."""
    if config.top == "linear":
        raise SplitlabError("--transport tcp hosts split learning with a top model (--top model) or aggVFL (--top "
                            "none, --aggregate sum); this case has --top linear: use --transport local")


def client_command(config: TrainConfig, party: int, address: str, secret: Path, out: Path,
                   timeout: float, tls: list[str] = (), keep_received: bool = False) -> list[str]:
    """`splitlab client` for feature party `party` of `config`, as its own process runs it (`tls`: its TLS
    options, `LocalClients.tls_options`; `keep_received`: it writes what it received, `received.pt`)."""
    command = [sys.executable, "-m", "splitlab", "client", "--connect", address, "--secret-file", str(secret),
               "--party", str(party), "--parties", str(config.parties), "--dataset", config.dataset,
               "--arch", config.arch, "--cut-layer", str(config.cut_layer), "--lr", repr(config.lr),
               "--optimizer", config.optimizer, "--seed", str(config.seed), "--data-draw", config.data_draw,
               "--device", config.device,
               "--defence", config.defence, "--task", config.task, "--positive", str(config.positive),
               "--partition", config.partition, "--aggregate", config.aggregate,
               "--timeout", repr(timeout), "--out", str(out), "--json", *tls]
    return command + (["--data-root", config.data_root] if config.data_root else []) + \
        (["--keep-received"] if keep_received else [])


def fsha_client_command(config: FshaClientConfig, address: str, secret: Path, out: Path, timeout: float) -> list[str]:
    """`splitlab client --kind fsha`: FSHA's honest victim of `config`, as its own process runs it."""
    if config.adam_eps != FshaClientConfig.adam_eps:
        raise SplitlabError(f"the victim's Adam epsilon {config.adam_eps:g} is not the client program's "
                            f"{FshaClientConfig.adam_eps:g}; run it in process")
    command = [sys.executable, "-m", "splitlab", "client", "--kind", "fsha", "--connect", address, "--secret-file",
               str(secret), "--dataset", config.dataset, "--arch", config.arch, "--level", str(config.level),
               "--lr-client", repr(config.lr_client), "--batch-size", str(config.batch_size), "--width",
               repr(config.width), "--seed", str(config.seed), "--data-draw", config.data_draw, "--device", config.device,
               "--timeout", repr(timeout),
               "--out", str(out), "--json"]
    return command + (["--data-root", config.data_root] if config.data_root else [])


def child_environment() -> dict[str, str]:
    """This process's environment, with this checkout first on the path and this process's torch thread count
    for OpenMP and MKL alike (the same arithmetic, so the same numbers: an MKL_NUM_THREADS left at another
    count changes how the client's convolutions sum)."""
    root = str(Path(vfl.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    threads = str(torch.get_num_threads())
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else ""), "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads}


RUNTIME_NOISE = (": at the pace of its first ",)
"""Lines a client's stderr can hold that say nothing of its end: a long run's one-off pace estimate."""


def _last_error(log: Path) -> str | None:
    """The last line a client wrote about its end (`RUNTIME_NOISE` is not one)."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines()
                 if line.strip() and not any(noise in line for noise in RUNTIME_NOISE)]
    except OSError:
        return None
    return lines[-1].removeprefix("error: ") if lines else None


def _stop(children: list[subprocess.Popen], grace: float = 0.0) -> None:
    """End clients still running: give them `grace` seconds to end on their own (a client the server told why
    the session stops ends with its own line), then SIGTERM (each stops as on Ctrl-C), then SIGKILL if stuck."""
    deadline = time.monotonic() + grace
    for child in children:
        try:
            child.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for child in children:
        if child.poll() is None:
            child.terminate()
    for child in children:
        try:
            child.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


class LocalClients:
    """Client processes on this machine for a server in this process: a fresh secret and each party's own key
    (files only this user can read; in memory where the system allows, so nothing is left on disk even when
    this process is killed; each client is handed its own key only), a listener on 127.0.0.1 (any free port; TLS with
    `tls`, the server's certificate and key and the CA the clients check it with) and each client's stderr kept.

        with LocalClients(timeout, parties=K) as local:
            local.start(command)               # e.g. client_command(config, 0, local.address, local.key(0), ...)
            ... run the server on local.listener ...
            local.wait()                       # every client exited 0, or one line naming the one that did not

    Leaving it stops whatever still runs (SIGTERM, then SIGKILL); a `SplitlabError` leaving it carries what
    each client said about its end, so a failure on either side is one line."""

    def __init__(self, timeout: float, parties: int = 1, tls: TlsFiles = TlsFiles()):
        check_local_parties(parties)
        self.timeout, self.parties, self.tls = timeout, parties, tls
        self.children: list[subprocess.Popen] = []
        self._logs: list[Path] = []
        self._folder: tempfile.TemporaryDirectory | None = None
        self._fds: dict[str, int] = {}                  # "/proc/self/fd/N" -> N, the secrets held in memory

    def __enter__(self) -> "LocalClients":
        self._folder = tempfile.TemporaryDirectory(prefix="splitlab-wire-")
        try:
            self.secret = self._private("secret", new_secret())
            shared = read_secret(self.secret).shared()
            self._keys = [self._private(f"party-{k}.key", party_key_text(shared, k)) for k in range(self.parties)]
            if self.tls.enabled:
                client_context(TlsFiles(ca=self.tls.ca))        # the clients' CA, checked before any starts
            own = server_context(TlsFiles(self.tls.cert, self.tls.key))
            self.listener = Listener("127.0.0.1", 0, self.timeout, own)
        except BaseException:
            self._release()
            raise
        return self

    def _private(self, name: str, text: str) -> Path:
        """`text` in a file only this user can read: a memory file (Linux: gone with the last process holding
        it, whatever ends them), named by its /proc path, else a file in this run's temporary folder."""
        if not hasattr(os, "memfd_create") or not Path("/proc/self/fd").is_dir():
            path = Path(self._folder.name) / name
            write_private(path, text)
            return path
        fd = os.memfd_create(f"splitlab-{name}")
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
        path = f"/proc/self/fd/{fd}"
        self._fds[path] = fd
        return Path(path)

    def _release(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._folder.cleanup()

    @property
    def address(self) -> str:
        return self.listener.address

    def key(self, party: int) -> Path:
        """Party `party`'s own key file (it proves that slot only)."""
        return self._keys[party]

    @property
    def tls_options(self) -> list[str]:
        """A client's TLS options: it checks the server's certificate against the CA."""
        return ["--tls-ca", self.tls.ca] if self.tls.enabled else []

    def start(self, command: list[str]) -> None:
        """Start `command`, handing it the secrets in memory that it names (its own key) and no other."""
        log = Path(self._folder.name) / f"client-{len(self.children)}.log"
        named = [fd for path, fd in self._fds.items() if path in command]
        with open(log, "w") as err:
            self.children.append(subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                  stderr=err, env=child_environment(), pass_fds=named,
                                                  start_new_session=True))    # Ctrl-C reaches the server only
        self._logs.append(log)

    def wait(self) -> None:
        """Wait for every client to exit (after the session's end); one that failed is a one-line error."""
        try:
            for child in self.children:
                child.wait(self.timeout)
        except subprocess.TimeoutExpired:
            raise SplitlabError(f"a client did not exit within {self.timeout:g} s of the session's end") from None
        failed = [(k, c.returncode) for k, c in enumerate(self.children) if c.returncode != 0]
        if failed:
            k, code = failed[0]
            raise SplitlabError(f"party {k} exited with code {code}: {_last_error(self._logs[k]) or 'no message'}")

    def __exit__(self, kind, exc, tb) -> None:
        try:
            _stop(self.children, 0.0 if exc is None else GRACE_SECONDS)
            self.listener.close()
            if isinstance(exc, SplitlabError):
                said = [f"party {k}: {e}" for k, log in enumerate(self._logs)      # not an echo of the server's
                        if (e := _last_error(log)) and e not in str(exc) and not e.startswith("the server ")]
                if said:
                    raise SplitlabError("; ".join([str(exc), *said])) from None
        finally:
            self._release()


def serve_locally(config: TrainConfig, run: Run, role: str = "honest", server: Role | None = None,
                  progress: bool = True, timeout: float = 60.0, launched_by: str = "train --transport tcp",
                  tls: TlsFiles = TlsFiles(), keep_received: bool = False) -> tuple[dict[str, Any], Run]:
    """The server of `config` in this process (`role`, or the `server` object given) and each feature party in
    a `splitlab client` process on 127.0.0.1; returns the server's metrics and its run (`run/server`), whose
    transcript/ holds what it received. Nothing of the clients' is read: their runs are `run/party-K`."""
    with LocalClients(timeout, config.parties, tls) as local:
        settings = ServeSettings(train=config, listen="127.0.0.1:0", secret_file=str(local.secret), timeout=timeout,
                                 role=role, tls_cert=tls.cert, tls_key=tls.key)
        server_run = Run.create("serve", {"serve": settings, "launched_by": launched_by}, run.file("server"))
        for k in range(config.parties):                # each a sub-run of this run's (its own marker)
            local.start(client_command(config, k, local.address, local.key(k), run.file(f"party-{k}"), timeout,
                                       local.tls_options, keep_received))
        metrics = serve(settings, server_run, role=server, listener=local.listener, progress=progress,
                        resumable=False)
        local.wait()
    server_run.close()
    return metrics, server_run


def train_over_tcp(config: TrainConfig, run: Run, role: str = "honest", progress: bool = True,
                   timeout: float = 60.0, tls: TlsFiles = TlsFiles(), keep_received: bool = False,
                   launched_by: str = "train --transport tcp") -> tuple[TrainedSplit, dict[str, Any]]:
    """Train `config` with the server here and each feature party in a `splitlab client` process on
    127.0.0.1 (over TLS with `tls`; each party writing what it received with `keep_received`); returns the
    trained split (the sides' final models) and the wire run's own facts."""
    metrics, server_run = serve_locally(config, run, role, progress=progress, timeout=timeout, tls=tls,
                                        keep_received=keep_received, launched_by=launched_by)
    device = resolve_device(config.device)
    return _assembled(config, device, run, metrics), {
        "transport": "tcp", "epoch_seconds": metrics["epoch_seconds"], "traffic_per_epoch": metrics["traffic_per_epoch"],
        "runs": {"server": str(server_run.path), "parties": [str(run.path / f"party-{k}") for k in range(config.parties)]}}


def _assembled(config: TrainConfig, device: torch.device, run: Run, metrics: dict[str, Any]) -> TrainedSplit:
    """The split model the two sides trained, from their final files (for `checkpoint.pt` and the curves)."""
    train = load_data(config)[0]
    client, server = build_parties(config, device, train.images)
    server.model.load_state_dict(load_top(run.path / "server" / "top.pt"))
    bottoms = client.clients if isinstance(client, Parties) else [client]
    for k, bottom in enumerate(bottoms):
        bottom.model.load_state_dict(load_bottom(run.path / f"party-{k}" / "bottom.pt"))
    found = dict(metrics.get("defence_report", {}))        # the sides' own, from their metrics: these parties
    found.update(feature_reports([                         # were rebuilt and never ran their defences
        json.loads((run.path / f"party-{k}" / "metrics.json").read_text()).get("defence_report", {})
        for k in range(config.parties)]))
    return TrainedSplit(config, client, server, metrics["accuracy"], metrics["history"], metrics["seconds"],
                        train.provenance, found)
