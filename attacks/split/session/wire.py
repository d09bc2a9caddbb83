"""FSHA over TCP (`splitlab attack fsha --transport tcp`): the malicious server in this process, FSHA's honest
victim in a `splitlab client --kind fsha` process of its own on 127.0.0.1, the server's gradients sent over the
wire. The victim is the client program's, built as in process (`vfl.fsha_victim`); it learns nothing of the
attack: it is sent rounds and gradients like any client, and a request for its targets' smashed data.

What this process holds. The attack (`FSHA`) gets what it gets in process: the public images and a session
(`vfl.wire.victim_session.OwnBatchSession`), through which it receives the victim's smashed data and returns
its gradients. The experiment around it is also the lab's referee, as in process, and scores against ground
truth the attack never sees: the targets (the first private image of each class), the private batch of every
round (the victim's order replayed from the victim's seed, to score the server's per-round reconstruction)
and, once the session has ended, the victim's final model read from its run directory (`client/bottom.pt`)
for the evaluation on more private images. Nothing of it is sent to the victim or handed to the attack.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import torch

from attacks.split.session.victim import FshaVictim, VictimSide
from vfl import data as datasets
from vfl.errors import SplitlabError
from vfl.fsha_victim import BatchStream
from vfl.models.fsha import build_client
from vfl.protocol import Client, Transcript
from vfl.runs import Run
from vfl.runtime import generator, resolve_device
from vfl.wire.client import load_bottom
from vfl.wire.keys import read_secret
from vfl.wire.launch import LocalClients, fsha_client_command
from vfl.wire.victim_session import open_victim_session

__all__ = ["victim_over_tcp"]

CLIENT_RUN = "client"
"""The victim process's run directory, inside the attack's."""


class _EndsAfterTargets:
    """The session as FSHA uses it: rounds, then the targets' smashed data, which is its last use; the session
    then ends (`end`: the victim is told BYE and exits) before the attack goes on to decode."""

    def __init__(self, session, end: Callable[[], None]):
        self._session, self._end = session, end

    def round(self, choose_gradient: Callable[[torch.Tensor, int], torch.Tensor]) -> int:
        return self._session.round(choose_gradient)

    def target_activations(self) -> torch.Tensor:
        smashed = self._session.target_activations()
        self._end()
        return smashed


def _final_client(victim: FshaVictim, folder: Path, device: torch.device) -> Client:
    """The referee's copy of the victim's final model (its architecture, the weights it saved at the end)."""
    model = build_client(victim.arch, victim.cut_layer, victim.width).to(device)
    model.load_state_dict(load_bottom(folder / "bottom.pt"))
    return Client(model, None)


@contextmanager
def victim_over_tcp(victim: FshaVictim, run: Run, *, private: datasets.ImageData, public: datasets.ImageData,
                    iterations: int, timeout: float = 60.0) -> Iterator[VictimSide]:
    """The victim in its own process and the malicious server's session with it, open while the attack runs: the
    victim side over TCP, which the attack observes as in process (`victim.observed`). Ctrl-C, `kill` or a failing
    peer end both sides with one line."""
    try:
        with LocalClients(timeout) as local:
            local.start(fsha_client_command(victim, local.address, local.secret, run.file(CLIENT_RUN), timeout))
            with _session(victim, run, local, iterations, private=private, public=public,
                          timeout=timeout) as side:
                yield side
    except KeyboardInterrupt:
        raise SplitlabError("interrupted; FSHA over TCP keeps nothing of an unfinished session") from None


@contextmanager
def _session(victim: FshaVictim, run: Run, local: LocalClients, iterations: int, *, private: datasets.ImageData,
             public: datasets.ImageData, timeout: float) -> Iterator[VictimSide]:
    """The session with the victim `local` started, as a victim side whose batches are the referee's replay of the
    victim's order (from its seed); the victim is told why when it ends early."""
    device = resolve_device(victim.device)
    replay = BatchStream(private.images, victim.batch_size, generator(victim.seed), device)
    targets, _ = datasets.first_of_each_class(private)
    transcript = Transcript()
    parties, open_ = None, False
    try:
        parties, session = open_victim_session(local.listener, read_secret(local.secret), victim, iterations, device,
                                               transcript)
        open_ = True

        def end() -> None:
            nonlocal open_
            parties.finish(timeout)
            parties.close(False)
            open_ = False
            local.wait()
            side.client = _final_client(victim, run.path / CLIENT_RUN, device)

        side = VictimSide(victim, device, private, public, None, replay, targets, transcript,
                          _EndsAfterTargets(session, end), replayed=True)
        yield side
    except KeyboardInterrupt:
        _abort(parties if open_ else None, "the server was interrupted")
        raise
    except SplitlabError as exc:
        _abort(parties if open_ else None, f"the server stopped ({exc})")
        raise
    except Exception as exc:                    # a bug: the victim still hears of it
        _abort(parties if open_ else None, f"the server failed ({type(exc).__name__})")
        raise


def _abort(parties, reason: str) -> None:
    """Tell the victim the session stops and why, then take the session down (nothing if it already ended)."""
    if parties is not None:
        parties.abort(reason)
        parties.close(True)
