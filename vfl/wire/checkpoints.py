"""Per-epoch checkpoints of one side of a wire run, so `--resume` continues it bit for bit.

`<run>/checkpoints/epoch-NNNN.pt` holds what that side needs to go on after epoch N: model and optimiser
state, and the random streams it draws from (the server's data order, a client's defence noise, torch's
global stream). Written atomically (a stopped run never leaves half a checkpoint); the last two are kept,
because the sides save one after the other at an epoch's end: a run stopped in between leaves the clients
one epoch ahead of the server, and the handshake resumes everyone from the server's last epoch.
"""
from __future__ import annotations

import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import torch

from vfl.errors import SplitlabError
from vfl.runs import Run, atomic_torch_save

FORMAT = "splitlab-wire-checkpoint/1"
FOLDER = "checkpoints"
KEEP = 2
_NAME = re.compile(r"epoch-(\d+)\.pt")


class EpochCheckpoints:
    """The checkpoints folder of one run directory (given as its `Run`, each file is recorded as the run's own
    before it is written, so `--overwrite` replaces it)."""

    def __init__(self, run: Run | Path):
        self.run = run if isinstance(run, Run) else None
        self.folder = Path(run.path if isinstance(run, Run) else run) / FOLDER

    def epochs(self) -> list[int]:
        """Epochs with a checkpoint, in order."""
        if not self.folder.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.folder.iterdir() if (m := _NAME.fullmatch(p.name)))

    def path(self, epoch: int) -> Path:
        return self.folder / f"epoch-{epoch:04d}.pt"

    def save(self, epoch: int, state: dict[str, Any]) -> Path:
        path = self.path(epoch) if self.run is None else self.run.file(f"{FOLDER}/{self.path(epoch).name}")
        atomic_torch_save({"format": FORMAT, "epoch": epoch, **state}, path)
        for old in self.epochs()[:-KEEP]:
            self.path(old).unlink(missing_ok=True)
        return path

    def load(self, epoch: int) -> dict[str, Any]:
        path = self.path(epoch)
        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(blob, dict) or blob.get("format") != FORMAT or blob.get("epoch") != epoch:
                raise ValueError("not a checkpoint of this epoch")
        except (OSError, pickle.UnpicklingError, RuntimeError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise SplitlabError(f"checkpoint {path} is unreadable or corrupt ({type(exc).__name__}); start the run "
                                "again without --resume") from None
        return blob

    def forget_after(self, epoch: int) -> None:
        """Drop checkpoints after `epoch` (the other side never reached them): the resumed run writes them anew."""
        for later in (e for e in self.epochs() if e > epoch):
            self.path(later).unlink(missing_ok=True)
