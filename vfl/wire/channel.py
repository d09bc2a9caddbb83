"""The transport: frames to and from one peer over torch.distributed's gloo point-to-point send/recv.

gloo's waits block in C++ (Ctrl-C would wait until they return) and its receive never times out on its
own, so each channel waits on gloo in two threads of its own, one per direction, while the caller waits on
an event: Ctrl-C reaches the caller at once, and a silent peer is reported after `timeout` seconds. Sends
are queued (the caller goes on computing; a failed send is reported at the next call) and leave in order;
a receive returns once its frame has arrived and passed its checks (`frames.Expect`).

gloo's limit: a receive is posted with the size the header declared, and gloo aborts the whole process
when a peer then sends more bytes than that (an EnforceNotMet in its I/O thread, which no caller can
catch). Peers that speak this protocol never do; the header checks refuse any size the handshake does not
allow before the payload's receive is posted.
"""
from __future__ import annotations

import datetime
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import torch
import torch.distributed as dist

from vfl.errors import SplitlabError
from vfl.wire.frames import HEADER_LEN, Expect, Frame, Kind, reason_of

TAG = 0
T = TypeVar("T")


class PeerStopped(SplitlabError):
    """The peer said it stops (an ABORT frame), or its connection is gone: nothing more can be sent to it."""


class PeerSilent(PeerStopped):
    """The peer sent (or took) nothing within the timeout: it is stuck or gone, and will not take more."""


def transport_error(peer: str, exc: BaseException) -> SplitlabError:
    """One line for what gloo said went wrong with `peer`."""
    text = str(exc)
    if any(s in text for s in ("closed by peer", "Connection reset", "Broken pipe", "Connection refused", "EOF")):
        return PeerStopped(f"{peer} closed the connection (its process ended or the network dropped)")
    return SplitlabError(f"{peer}: transport error ({text.splitlines()[0][:120] if text else type(exc).__name__})")


def interruptible(fn: Callable[[], T], timeout: float, what: str) -> T:
    """`fn()` run in a thread of its own, waited for at most `timeout` seconds so that Ctrl-C and the timeout
    reach the caller even while `fn` blocks in C++ (connecting, building the process group)."""
    box: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            box.append((True, fn()))
        except BaseException as exc:            # handed to the caller's thread
            box.append((False, exc))
        done.set()

    threading.Thread(target=run, name=what, daemon=True).start()
    if not done.wait(timeout):
        raise SplitlabError(f"{what} did not finish within {timeout:g} s (--timeout)")
    ok, value = box[0]
    if not ok:
        raise value
    return value


def process_group(store: dist.Store, rank: int, size: int, hostname: str, timeout: float) -> dist.ProcessGroup:
    """A gloo process group of `size` ranks over `store`, its sockets on `hostname` (the address peers reach
    this process at: 127.0.0.1 keeps everything on this machine)."""
    options = dist.ProcessGroupGloo._Options()      # the documented constructor picks the device from the
    options._devices = [dist.ProcessGroupGloo.create_device(hostname=hostname)]     # host name instead
    options._timeout = datetime.timedelta(seconds=timeout)
    return interruptible(lambda: dist.ProcessGroupGloo(store, rank, size, options), timeout + 5,
                         "connecting the parties' process group")


class _Pending:
    __slots__ = ("done", "error", "keep")

    def __init__(self, keep: torch.Tensor):
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.keep = keep                        # the buffer must live until gloo is done with it


class _Waiter:
    """A daemon thread waiting on gloo works in the order they were posted."""

    def __init__(self, name: str):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, work: Any, keep: torch.Tensor) -> _Pending:
        pending = _Pending(keep)
        self._queue.put((work, pending))
        return pending

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            work, pending = item
            try:
                work.wait()
            except Exception as exc:          # gloo's failure, reported in the caller's thread
                pending.error = exc
            pending.done.set()

    def close(self, timeout: float) -> None:
        """Stop after the works already queued; wait up to `timeout` seconds for the thread to end."""
        self._queue.put(None)
        self._thread.join(timeout)


@dataclass
class Traffic:
    """What crossed this channel: frames and bytes (headers included) each way."""
    frames_sent: int = 0
    bytes_sent: int = 0
    frames_received: int = 0
    bytes_received: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


class Channel:
    """Frames to and from the peer of rank `peer` in `group`; `name` says who it is in errors ("party 0")."""

    def __init__(self, group: dist.ProcessGroup, peer: int, name: str, timeout: float):
        self.group, self.peer, self.name, self.timeout = group, peer, name, timeout
        self._sender = _Waiter(f"{name} sends")
        self._receiver = _Waiter(f"{name} receives")
        self._sends: list[_Pending] = []
        self._receives: list[_Pending] = []
        self._broken: SplitlabError | None = None
        self.traffic = Traffic()

    def send(self, frame: Frame) -> None:
        """Queue `frame` (header, then payload) for the peer; returns at once."""
        self._check_sends()
        for tensor in (frame.header(),) if frame.tensor is None else (frame.header(), frame.tensor.detach().cpu().contiguous()):
            self._post(lambda t=tensor: self.group.send([t], self.peer, TAG), tensor, self._sender, self._sends)
        self.traffic.frames_sent += 1
        self.traffic.bytes_sent += frame.nbytes

    def receive(self, expect: Expect) -> Frame:
        """The peer's next frame once it passed `expect`'s checks. An ABORT raises with the peer's reason.

        After any failure the channel receives nothing more: the rest of a refused frame may still be on
        its way, and a receive posted for it would make gloo abort the process."""
        if self._broken is not None:
            raise self._broken
        try:
            return self._receive(expect)
        except SplitlabError as exc:
            self._broken = exc
            raise

    def _receive(self, expect: Expect) -> Frame:
        self._check_sends()
        header = torch.empty(HEADER_LEN, dtype=torch.int64)
        self._wait(self._post(lambda: self.group.recv([header], self.peer, TAG), header, self._receiver, self._receives))
        allow, step, shape = expect.check_header(header.tolist(), self.name)
        frame = Frame(allow.kind, step)
        if shape is not None:
            payload = torch.empty(shape, dtype=allow.dtype)
            if payload.numel():
                self._wait(self._post(lambda: self.group.recv([payload], self.peer, TAG), payload, self._receiver,
                                      self._receives))
            expect.check_payload(allow, payload, step, self.name)
            frame = Frame(allow.kind, step, payload)
        self.traffic.frames_received += 1
        self.traffic.bytes_received += frame.nbytes
        if frame.kind is Kind.ABORT:
            raise PeerStopped(f"{self.name} stopped: {reason_of(frame)}")
        return frame

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every queued frame was taken by the peer."""
        try:
            for pending in self._sends:
                self._wait(pending, timeout, "took no frame")
            self._check_sends()
        except SplitlabError as exc:
            self._broken = self._broken or exc
            raise

    @property
    def peer_stopped(self) -> bool:
        return isinstance(self._broken, PeerStopped)

    def drain(self, grace: float) -> None:
        """Give what is still pending up to `grace` seconds to resolve (a peer that stopped resolves ours as
        it exits); nothing for a peer found silent."""
        deadline = time.monotonic() + (0.0 if isinstance(self._broken, PeerSilent) else grace)
        for pending in [*self._sends, *self._receives]:
            pending.done.wait(max(0.0, deadline - time.monotonic()))

    def join(self, timeout: float) -> None:
        self._sender.close(timeout)
        self._receiver.close(timeout)

    def _post(self, op: Callable[[], Any], keep: torch.Tensor, waiter: _Waiter, posted: list[_Pending]) -> _Pending:
        try:
            pending = waiter.put(op(), keep)
        except RuntimeError as exc:             # the pair was already closed
            raise transport_error(self.name, exc) from None
        if posted is self._receives:            # a failed receive raised already; sends report at _check_sends
            posted[:] = [p for p in posted if not p.done.is_set()]
        posted.append(pending)
        return pending

    def _wait(self, pending: _Pending, timeout: float | None = None, silence: str = "sent nothing") -> None:
        timeout = self.timeout if timeout is None else timeout
        if not pending.done.wait(timeout):
            raise PeerSilent(f"{self.name} {silence} for {timeout:g} s (--timeout); it is stuck or gone")
        if pending.error is not None:
            raise transport_error(self.name, pending.error)

    def _check_sends(self) -> None:
        while self._sends and self._sends[0].done.is_set():
            pending = self._sends.pop(0)
            if pending.error is not None:
                raise transport_error(self.name, pending.error)


def close_channels(channels: list[Channel], failed: bool, grace: float = 2.0) -> None:
    """End a session: drain the channels, take their process group down (a failed session aborts what is
    still pending), then wait for their threads to end. All of it before the interpreter shuts down: a gloo
    wait that returns during shutdown ends the process with std::terminate (Python unwinds its daemon thread
    through gloo's C++ frames)."""
    for channel in channels:
        channel.drain(grace)
    if channels:
        try:
            channels[0].group.abort() if failed else channels[0].group.shutdown()
        except RuntimeError:                 # already broken: nothing left to take down
            pass
    for channel in channels:
        channel.join(grace)
