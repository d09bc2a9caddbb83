"""Downloads with bounded waits: the lab's only network code (`splitlab datasets --download` and
`splitlab weights --download`); nothing else fetches anything.

Every wait for the network is bounded by `timeout` seconds without data (`Clock`): the name lookup,
the connection (to the server, or to the proxy urllib takes from $HTTPS_PROXY / $HTTP_PROXY, less
$NO_PROXY), the answer and each read. A server that accepts and then stays silent ends the download
`timeout` seconds later. The whole body has one deadline too, set when the server answers: `timeout` more
seconds plus its declared length at `MIN_RATE`, so a server or proxy trickling a byte now and then (never
silent for `timeout`) ends the download all the same. The network is touched only by a worker thread that the caller waits on with
that deadline, since a name lookup cannot be interrupted: a stuck resolver does not hold the command.

A download goes to a temporary name beside its target (`staged`: `.NAME.PID.splitlab.part`, which no loader
reads); the caller checks it and renames it into place. A failed or interrupted download removes its
temporary file, and one a killed process left behind is removed by the next download into that folder.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import re
import shutil
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator
from urllib.parse import urlsplit

DEFAULT_TIMEOUT = 60.0
"""Seconds without data after which a download gives up (`--timeout`)."""
MAX_TIMEOUT = 86_400.0
"""A day: longer waits are a typo (and overflow the thread waits)."""
TIMEOUT_HELP = ("Give up when the network sends nothing for this many seconds (name lookup, connecting, "
                "the answer, each read), or a file takes longer than this plus its size at 64 KiB/s.")

_CHUNK = 1 << 16
_USER_AGENT = "splitlab"
MIN_RATE = 64 * 1024
"""Bytes a second a download's body must average for its deadline (a dial-up modem's 7 KB/s aside, any link)."""
UNDECLARED_BYTES = 1 << 30
"""The length a body without Content-Length is given for its deadline (over every file the lab fetches)."""


@dataclass(eq=False)
class DownloadError(Exception):
    """Why fetching `url` failed. `unreachable`: no answer at all (no network, refused, no name, silent)."""

    url: str
    reason: str
    unreachable: bool = True

    def __str__(self) -> str:
        return describe([self])


def describe(errors: list[DownloadError]) -> str:
    """One line for the failed attempts at one file (its mirrors): hosts that failed the same way share it."""
    parts: dict[tuple[str, bool, str], list[str]] = {}
    for error in errors:
        via = _via(error.url) if error.unreachable else ""
        parts.setdefault((error.reason, error.unreachable, via), []).append(
            _host(error.url) if error.unreachable else error.url)
    return "; ".join(f"cannot reach {' or '.join(wheres)}{via} ({reason})" if unreachable else f"{' or '.join(wheres)} {reason}"
                     for (reason, unreachable, via), wheres in parts.items())


def _host(url: str) -> str:
    return urlsplit(url).hostname or url


def _via(url: str) -> str:
    """' through proxy HOST:PORT' when urllib sends `url` through a proxy, else ''."""
    parts = urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return ""
    return f" through proxy {urlsplit(proxy).netloc or proxy}"


def check_timeout(timeout: float) -> float:
    """`--timeout` as a number of seconds the waits can take, or a one-line error."""
    from vfl.validate import check_number

    return check_number("--timeout", timeout, low=0, low_open=True, high=MAX_TIMEOUT)


class Clock:
    """The deadline waits share: `timeout` seconds after the last data arrived (or the start). One clock
    serves all mirrors of a file, so a silent network ends the download once, not once per mirror."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT):
        self.timeout = float(timeout)
        self.progress()

    def progress(self) -> None:
        self._deadline = time.monotonic() + self.timeout

    def remaining(self) -> float:
        return max(0.0, self._deadline - time.monotonic())


def _reason(exc: BaseException, timeout: float) -> tuple[str, bool]:
    """(what went wrong in a few words, whether the server was unreachable)."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"answered HTTP {exc.code} {exc.reason}", False
    if isinstance(exc, urllib.error.URLError):
        exc = exc.reason if isinstance(exc.reason, BaseException) else OSError(str(exc.reason))
    if isinstance(exc, socket.gaierror):
        return f"name lookup failed: {exc.strerror or exc}", True
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout:g} s", True
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused", True
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror, True
    text = str(exc).strip().splitlines()
    return (f"{type(exc).__name__}: {text[0][:160]}" if text else type(exc).__name__), True


def _stream(url: str, timeout: float, chunks: queue.Queue, stop: threading.Event) -> None:
    """Worker thread: open `url` and hand over ("length", n), then ("data", bytes) until b"", or ("error", exc)."""
    def put(item: tuple) -> None:
        while not stop.is_set():
            with contextlib.suppress(queue.Full):
                chunks.put(item, timeout=0.1)
                return

    try:
        request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
        opener = urllib.request.build_opener()   # not urlopen's: that one keeps the proxies of its first call
        with opener.open(request, timeout=timeout) as response:
            put(("length", response.length))
            while not stop.is_set():
                chunk = response.read1(_CHUNK)
                put(("data", chunk))
                if not chunk:
                    return
    except BaseException as exc:  # noqa: BLE001 - handed to the caller, who reports it
        put(("error", exc))


def fetch(url: str, out: BinaryIO, clock: Clock, *, hashes: tuple = (), progress: bool = False) -> int:
    """Write `url`'s body to `out`, feeding `hashes`; returns the byte count. Raises `DownloadError`
    when the network fails, or stays silent until the clock runs out."""
    chunks: queue.Queue = queue.Queue(maxsize=16)
    stop = threading.Event()
    # the worker's own socket timeout is longer than the clock, so the clock (which says what went silent, and
    # when) always ends a silent download first
    threading.Thread(target=_stream, args=(url, 2 * clock.timeout + 1, chunks, stop), daemon=True,
                     name="splitlab-download").start()
    received, length, bar, deadline = 0, None, _NoBar(), None
    with contextlib.ExitStack() as stack:
        try:
            while True:
                wait = clock.remaining() if deadline is None else min(clock.remaining(), deadline - time.monotonic())
                try:
                    kind, value = chunks.get(timeout=max(wait, 0.0))
                except queue.Empty:
                    if deadline is not None and time.monotonic() >= deadline:
                        whole = f"{received} of {length} bytes" if length is not None else f"{received} bytes"
                        raise DownloadError(url, f"sent {whole} within the download's {total:.0f} s (--timeout plus "
                                            f"the body at {MIN_RATE // 1024} KiB/s): a stalled or trickling "
                                            "connection", unreachable=False) from None
                    if received:
                        raise DownloadError(url, f"sent nothing for {clock.timeout:g} s after {received} bytes",
                                            unreachable=False) from None
                    raise DownloadError(url, f"no answer within {clock.timeout:g} s") from None
                if kind == "error":
                    reason, unreachable = _reason(value, clock.timeout)
                    if received:
                        reason, unreachable = f"failed after {received} bytes ({reason})", False
                    raise DownloadError(url, reason, unreachable)
                clock.progress()
                if kind == "length":             # the server answered: only now a bar (a refusal is one line)
                    length = value
                    total = clock.timeout + (length if length is not None else UNDECLARED_BYTES) / MIN_RATE
                    deadline = time.monotonic() + total
                    bar = stack.enter_context(_bar(url, length, progress))
                    continue
                if not value:
                    break
                out.write(value)
                for digest in hashes:
                    digest.update(value)
                received += len(value)
                bar.advance(len(value))
        finally:
            stop.set()
    if length is not None and received != length:
        raise DownloadError(url, f"ended the download after {received} of {length} bytes", unreachable=False)
    return received


def download(url: str, path: Path, clock: Clock, *, md5: str | None = None, sha256_prefix: str | None = None,
             progress: bool = False) -> None:
    """Fetch `url` into `path` (a temporary name from `staged`) and check its digest."""
    md5_hash, sha256 = hashlib.md5(usedforsecurity=False), hashlib.sha256()
    with open(path, "wb") as out:
        fetch(url, out, clock, hashes=(md5_hash, sha256), progress=progress)
    if md5 is not None and md5_hash.hexdigest() != md5:
        raise DownloadError(url, "gave a file that fails its checksum (md5)", unreachable=False)
    if sha256_prefix is not None and not sha256.hexdigest().startswith(sha256_prefix):
        raise DownloadError(url, "gave a file that fails its checksum (sha256)", unreachable=False)


_PART = re.compile(r"\..+\.(\d+)\.splitlab\.part")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:                 # someone else's process: alive
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def staged(target: Path) -> Iterator[Path]:
    """A temporary name beside `target` (`.NAME.PID.splitlab.part`) to download or unpack into; removed on the way
    out, so the caller renames it into place inside the block. Folders created on the way to `target` are
    removed again if the block fails and they stayed empty; temporary files of dead processes go first."""
    target = Path(target)
    created = []
    folder = target.parent
    while not folder.exists():
        created.append(folder)
        folder = folder.parent
    target.parent.mkdir(parents=True, exist_ok=True)
    for entry in target.parent.iterdir():
        match = _PART.fullmatch(entry.name)
        if match and int(match[1]) != os.getpid() and not _alive(int(match[1])):
            _remove(entry)
    part = target.with_name(f".{target.name}.{os.getpid()}.splitlab.part")
    try:
        yield part
    except BaseException:
        _remove(part)
        for folder in created:                       # deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    _remove(part)


class _NoBar:
    def advance(self, n: int) -> None:
        pass


class _Bar(_NoBar):
    def __init__(self, progress, task):
        self._progress, self._task = progress, task

    def advance(self, n: int) -> None:
        self._progress.advance(self._task, n)


@contextlib.contextmanager
def _bar(url: str, length: int | None, enabled: bool) -> Iterator[_NoBar]:
    """Bytes received, on stderr when it is a terminal (stdout stays clean for --json, a log gets only the
    one-line outcome)."""
    from rich.console import Console

    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield _NoBar()
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  console=console) as progress:
        yield _Bar(progress, progress.add_task(url.rsplit("/", 1)[-1], total=length))
