"""Where the pretrained weights of the perceptual metrics are looked for, and reading them; never downloads.

A metric's file is read from a path the caller gives or from the torch hub cache
(`<torch hub dir>/checkpoints/`, which $TORCH_HOME moves), where `splitlab weights --download` puts it.
When it is absent or unreadable the loaders return `Unavailable(reason)` (the caller writes `null` and the
reason into metrics.json) or, with `require=True`, raise `SplitlabError`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from vfl.errors import SplitlabError

LPIPS_BACKBONES = {
    # LPIPS net name -> (display name, torchvision checkpoint file that torch hub would cache)
    "alex": ("AlexNet", "alexnet-owt-7be5be79.pth"),
    "vgg": ("VGG16", "vgg16-397923af.pth"),
    "squeeze": ("SqueezeNet 1.1", "squeezenet1_1-b8a52dc0.pth"),
}
FID_WEIGHTS_FILE = "pt_inception-2015-12-05-6726825d.pth"
"""pytorch-fid's port of the TensorFlow FID Inception, as cached by `load_state_dict_from_url`."""


@dataclass(frozen=True)
class Unavailable:
    """A metric that cannot be computed here; `reason` is one line naming the fix."""

    reason: str


def unavailable(reason: str, require: bool) -> Unavailable:
    """Return the reason as a value, or raise it when the caller asked for the metric to be required."""
    if require:
        raise SplitlabError(reason)
    return Unavailable(reason)


def hub_checkpoint(filename: str, hub_dir: Path | None) -> Path:
    """Where torch hub caches `filename` (`<hub_dir>/checkpoints/`), hub_dir defaulting to torch's."""
    return Path(hub_dir if hub_dir is not None else torch.hub.get_dir()) / "checkpoints" / filename


def read_state_dict(path: Path) -> dict[str, torch.Tensor] | str:
    """Load a tensor-only state dict on CPU, or return a one-line reason why it cannot be read."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # corrupt, truncated, or not a plain tensor checkpoint
        first_line = (str(err).strip().splitlines() or [""])[0]
        return f"cannot read {path}: {type(err).__name__}: {first_line}"
    if not isinstance(state, dict):
        return f"{path} holds a {type(state).__name__}, not a state dict"
    return state


def local_weights(metric: str, what: str, filename: str, given: Path | None, hub_dir: Path | None, name: str,
                  option: str, require: bool) -> tuple[Path, dict | Unavailable]:
    """A metric's weight file read from `given` or the torch hub cache, or why it cannot be (naming the
    command that fetches it and the option that points at it)."""
    path = Path(given) if given is not None else hub_checkpoint(filename, hub_dir)
    if not path.is_file():
        return path, unavailable(f"{metric} needs {what} ({filename}) at {path}; run `splitlab weights --download "
                                 f"{name}`, put them there or pass {option}", require)
    state = read_state_dict(path)
    return path, unavailable(f"{metric}: {state}", require) if isinstance(state, str) else state
