"""Transcripts on disk: what a server received, one file per finished epoch in `<run>/transcript/`.

`epoch-0001.pt`, `epoch-0002.pt`, ... hold the messages received during each epoch (its training rounds and
its evaluation queries) and `final.pt` the evaluation targets' query after training. Each is written
atomically once its epoch has finished, so a run stopped mid-way keeps every finished epoch's messages and
nothing of the unfinished one. Files hold plain containers and tensors (`torch.load(weights_only=True)`),
so an attack can later be fed from the files alone: `load_transcript(run_dir).queries()[-1].tensor`.
"""
from __future__ import annotations

import pickle
import re
import zipfile
from pathlib import Path

import torch

from vfl.errors import SplitlabError
from vfl.protocol import Transcript, TranscriptEntry
from vfl.runs import Run, atomic_torch_save

FORMAT = "splitlab-transcript/1"
FOLDER = "transcript"
FINAL = "final"
_EPOCH = re.compile(r"epoch-(\d+)\.pt")


def epoch_file(epoch: int) -> str:
    return f"epoch-{epoch:04d}"


class TranscriptFiles:
    """Writes the entries a `Transcript` gained since the last write as one file of `run/transcript/` (given a
    `Run`, each file is recorded as the run's own before it is written)."""

    def __init__(self, run: Run | Path, transcript: Transcript):
        self.run = run if isinstance(run, Run) else None
        self.folder = Path(run.path if isinstance(run, Run) else run) / FOLDER
        self.transcript = transcript
        self._written = len(transcript.entries)

    def write(self, name: str) -> Path:
        entries = self.transcript.entries[self._written:]
        path = self.folder / f"{name}.pt" if self.run is None else self.run.file(f"{FOLDER}/{name}.pt")
        atomic_torch_save({"format": FORMAT, "entries": [
            {"sender": e.sender, "kind": e.kind, "step": e.step, "shape": list(e.shape), "tensor": e.tensor}
            for e in entries]}, path)
        self._written = len(self.transcript.entries)
        return path

    def forget_after(self, epoch: int) -> None:
        """Remove files of epochs after `epoch` and the final one: a run resumed from `epoch` writes them anew."""
        for path in _files(self.folder):
            match = _EPOCH.fullmatch(path.name)
            if match is None or int(match.group(1)) > epoch:
                path.unlink()


def _files(folder: Path) -> list[Path]:
    """The transcript's files in the order they were written: epochs by number, then the final query."""
    epochs = sorted((int(m.group(1)), p) for p in folder.glob("epoch-*.pt") if (m := _EPOCH.fullmatch(p.name)))
    final = [folder / f"{FINAL}.pt"] if (folder / f"{FINAL}.pt").is_file() else []
    return [p for _, p in epochs] + final


def load_transcript(run_dir: Path | str) -> Transcript:
    """Every message a server received during the run in `run_dir`, in order (tensors when it kept them)."""
    folder = Path(run_dir) / FOLDER
    files = _files(folder) if folder.is_dir() else []
    if not files:
        raise SplitlabError(f"{folder} holds no transcript; give the run directory of `splitlab serve` or of "
                            "`splitlab train --role curious`")
    entries = []
    for path in files:
        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(blob, dict) or blob.get("format") != FORMAT:
                raise ValueError("not a transcript")
            entries += [TranscriptEntry(str(e["sender"]), str(e["kind"]), int(e["step"]),
                                        tuple(int(d) for d in e["shape"]), e["tensor"],
                                        None if e["tensor"] is None else e["tensor"].nbytes)
                        for e in blob["entries"]]
        except (pickle.UnpicklingError, RuntimeError, ValueError, KeyError, TypeError, EOFError,
                zipfile.BadZipFile) as exc:
            raise SplitlabError(f"transcript file {path} is corrupt ({type(exc).__name__}); "
                                "rerun the server to record it again") from None
    return Transcript(keep_tensors=bool(entries) and all(e.tensor is not None for e in entries), entries=entries)
