"""The label attacks over TCP (`splitlab attack label-* --transport tcp`): the label party (an honest `splitlab
serve`, with its send-back defences) in this process, the attacking feature party a `splitlab client
--keep-received` process of its own on 127.0.0.1. The attack then reads only what that party's process wrote:
the sample ids the server named in each round and the cut gradient it returned (`received.pt`), and its final
bottom model (`bottom.pt`). The experiment around it is the referee, as in process: the task's accuracy and the
private labels it scores against are the label party's and never reach the attack.

The victim is split learning with a top model (`--top model`); it is the training `splitlab train` runs (the same
seeded models, output layer and data order), so a fixed seed gives the same gradients, and so the same answer, as
the in-process run.
"""
from __future__ import annotations

import torch

from attacks.split.labels.victim import TaskData, Trained
from vfl.case import SplitCase
from vfl.protocol import CutGradient, Transcript
from vfl.runs import Run
from vfl.wire.client import load_received
from vfl.wire.launch import check_hosted, train_over_tcp

__all__ = ["wire_config", "train_victim_over_tcp"]


def wire_config(victim: SplitCase) -> SplitCase:
    """The split training `splitlab serve` and `splitlab client` run for this victim: the case itself; a case the
    wire cannot host is refused in one line."""
    check_hosted(victim)
    return victim


class _Received:
    """The attacking party's side as its process recorded it: what it received, and its final model."""

    def __init__(self, model: torch.nn.Module, defences: tuple, gradients: list[torch.Tensor]):
        self.model = model
        self.defences = defences            # built from its configuration: the same secret transforms
        self.seen = Transcript(keep_tensors=True)
        for step, g in enumerate(gradients):
            self.seen.record(CutGradient(step, g))


def train_victim_over_tcp(victim: SplitCase, data: TaskData, run: Run, progress: bool = True,
                          timeout: float = 60.0) -> Trained:
    """Train the victim with the attacking party in its own process over TCP; what it kept, read back."""
    from attacks.metrics.labels import auc

    trained, facts = train_over_tcp(wire_config(victim), run, progress=progress, timeout=timeout, keep_received=True,
                                    launched_by="attack label --transport tcp")
    samples, gradients = load_received(run.path / "party-0" / "received.pt")
    client = _Received(trained.client.model, trained.client.defences, gradients)
    with torch.no_grad():
        logits = trained.server.predict(trained.client.infer(data.test.images.to(next(client.model.parameters())
                                                                                   .device)))
    task_auc = auc((logits[:, 1] - logits[:, 0]).cpu(), data.test.labels == 1) if victim.classes == 2 else None
    return Trained(victim, client, trained.server, samples, trained.accuracy, trained.history, trained.seconds,
                   task_auc, (), trained.defence_report)
