"""`splitlab weights`: where the pretrained weights of LPIPS and FID are looked for, and fetching them.

`attacks.metrics` never downloads: `load_lpips` and `load_fid` read torchvision's backbone files and
pytorch-fid's Inception file from the torch hub cache (`<torch hub dir>/checkpoints/`, $TORCH_HOME
moves it) or from --lpips-weights / --fid-weights. This command lists those files and, with
--download, fetches them into that cache: this and `splitlab datasets --download` are the lab's only
network uses, both through `vfl.download` (every wait bounded by --timeout; $HTTPS_PROXY honoured).
A download goes to a temporary name beside its target, must match the hash in its file name (where
torchvision's names carry one) and load with `torch.load(..., weights_only=True)` as a tensor state
dict, and is then renamed into place, so an interrupted or bad download never leaves a file the
loaders would pick up.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

import torch
import typer

from attacks.metrics import FID_WEIGHTS_FILE, LPIPS_BACKBONES, _hub_checkpoint
from vfl.cli_options import RunOptions, with_run_options
from vfl.cli_output import emit, handles_errors, table
from vfl.download import DEFAULT_TIMEOUT, TIMEOUT_HELP, Clock, DownloadError, check_timeout, staged
from vfl.download import download as download_file
from vfl.errors import SplitlabError

TORCHVISION_URLS = {
    # LPIPS net name -> the torchvision URL of its backbone (torchvision.models.*_Weights.IMAGENET1K_V1.url)
    "alex": "https://download.pytorch.org/models/alexnet-owt-7be5be79.pth",
    "vgg": "https://download.pytorch.org/models/vgg16-397923af.pth",
    "squeeze": "https://download.pytorch.org/models/squeezenet1_1-b8a52dc0.pth",
}
FID_NAME = "fid"
NAMES = (*LPIPS_BACKBONES, FID_NAME)
DEFAULT_DOWNLOADS = ("alex", FID_NAME)  # what the metrics use by default (LPIPS alex, FID)

Downloader = Callable[..., None]  # fetch_url(url, dst, hash_prefix=None, progress=True, timeout=...)


@dataclass(frozen=True)
class WeightFile:
    """One pretrained weight file a metric reads, where it is looked for and where it comes from."""

    name: str
    metric: str
    model: str
    file: str
    url: str
    option: str  # the flag that points a command at a copy elsewhere
    hash_prefix: Optional[str]  # sha256 prefix torch hub checks (torchvision's file names carry one)

    def path(self, hub_dir: Path | None = None) -> Path:
        return _hub_checkpoint(self.file, hub_dir)


def _fid_url() -> str:
    from pytorch_fid.inception import FID_WEIGHTS_URL

    return FID_WEIGHTS_URL


def weight_files() -> dict[str, WeightFile]:
    """Every weight file, by name: the LPIPS backbones, then FID's Inception."""
    files = {}
    for net, (display, filename) in LPIPS_BACKBONES.items():
        digest = filename.rsplit("-", 1)[-1].split(".", 1)[0]
        files[net] = WeightFile(net, "lpips", display, filename, TORCHVISION_URLS[net], "--lpips-weights", digest)
    files[FID_NAME] = WeightFile(FID_NAME, "fid", "pytorch-fid Inception v3", FID_WEIGHTS_FILE, _fid_url(),
                                 "--fid-weights", None)
    return files


def describe(hub_dir: Path | None = None) -> list[dict]:
    """One row per weight file: where it is looked for, whether it is there, its size in bytes."""
    rows = []
    for wf in weight_files().values():
        path = wf.path(hub_dir)
        present = path.is_file()
        rows.append({"name": wf.name, "metric": wf.metric, "model": wf.model, "file": wf.file, "path": str(path),
                     "present": present, "bytes": path.stat().st_size if present else None, "url": wf.url,
                     "option": wf.option})
    return rows


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def fetch_url(url: str, dst: str, hash_prefix: str | None = None, progress: bool = True,
              timeout: float = DEFAULT_TIMEOUT) -> None:
    """The downloader: torch hub's `download_url_to_file` arguments, with every wait bounded by `timeout`."""
    download_file(url, Path(dst), Clock(timeout), sha256_prefix=hash_prefix, progress=progress)


def download(name: str, *, hub_dir: Path | None = None, force: bool = False, progress: bool = True,
             timeout: float = DEFAULT_TIMEOUT, downloader: Downloader | None = None) -> tuple[Path, bool]:
    """Fetch one weight file into the hub cache; returns (path, whether it was downloaded now).

    The file goes to a temporary name in the target folder, is checked to load as a tensor state
    dict, then renamed into place (atomic on one file system). Any failure is one `SplitlabError`
    naming the URL and the manual alternative, and leaves no file behind."""
    files = weight_files()
    if name not in files:
        raise SplitlabError(f"unknown weight file {name!r}; choose one of {', '.join(files)}")
    wf = files[name]
    path = wf.path(hub_dir)
    if path.is_file() and not force:
        return path, False
    manual = f"download {wf.url} elsewhere and put it at {path}, or pass {wf.option} FILE"
    fetch = downloader if downloader is not None else fetch_url
    try:
        with staged(path) as partial:
            try:
                fetch(wf.url, str(partial), hash_prefix=wf.hash_prefix, progress=progress, timeout=timeout)
            except DownloadError as exc:
                raise SplitlabError(f"{exc}: {manual}") from None
            except Exception as exc:  # another downloader's errors: HTTP, hash mismatch, unwritable cache
                raise SplitlabError(f"cannot download {wf.url} ({_one_line(exc)}); {manual}") from None
            try:
                state = torch.load(partial, map_location="cpu", weights_only=True)
            except Exception as exc:
                raise SplitlabError(f"{wf.url} did not give a loadable weights file ({_one_line(exc)}); "
                                    f"{manual}") from None
            if not isinstance(state, dict) or not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
                raise SplitlabError(f"{wf.url} did not give a tensor state dict; {manual}")
            os.replace(partial, path)
    except OSError as exc:                       # the cache folder: not writable, a file on the way
        raise SplitlabError(f"cannot write {path} ({exc.strerror or exc}); {manual}") from None
    return path, True


def _size(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.1f} MiB"


@with_run_options("as_json")
def weights_command(
    names: Optional[List[str]] = typer.Argument(None, help="With --download: the files to fetch, of "
                                                + ", ".join(NAMES) + " (default: " + " and ".join(DEFAULT_DOWNLOADS)
                                                + ", what the metrics use)."),
    fetch: bool = typer.Option(False, "--download", help="Fetch the named files (default alex and fid) into the torch "
                               "hub cache from their public URLs; needs the network ($HTTPS_PROXY is honoured)."),
    force: bool = typer.Option(False, "--force", help="With --download: fetch again even if the file is there."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT, "--timeout", metavar="SECONDS", help=TIMEOUT_HELP),
    opts: RunOptions = RunOptions(),
) -> None:
    """List where the LPIPS and FID pretrained weights are looked for and whether they are there;
    --download fetches them."""
    as_json = opts.as_json
    check_timeout(timeout)
    if names and not fetch:
        raise SplitlabError("weight names select what --download fetches; add --download")
    wanted = list(dict.fromkeys(names or DEFAULT_DOWNLOADS)) if fetch else []
    for name in wanted:  # refuse a misspelt name before fetching anything
        if name not in NAMES:
            raise SplitlabError(f"unknown weight file {name!r}; choose one of {', '.join(NAMES)}")
    downloaded, already = [], []
    for name in wanted:
        _, fresh = download(name, force=force, progress=not as_json, timeout=timeout)
        (downloaded if fresh else already).append(name)
    rows = describe()
    record = {"command": "weights", "hub_dir": str(Path(torch.hub.get_dir())), "weights": rows}
    if fetch:
        record.update(downloaded=downloaded, already_present=already)

    def show(console) -> None:
        console.print(table(f"pretrained weights for LPIPS and FID (torch hub cache {record['hub_dir']})",
                            [{**r, "present": "yes" if r["present"] else "no", "size": _size(r["bytes"])} for r in rows],
                            ["name", "metric", "model", "present", "size", "path"]), markup=False)
        for name in downloaded:
            console.print(f"downloaded {name}", markup=False, highlight=False)
        for name in already:
            console.print(f"{name} is already there (--force fetches it again)", markup=False, highlight=False)
        missing = [r for r in rows if not r["present"]]
        if missing:
            console.print("missing files: `splitlab weights --download " + " ".join(r["name"] for r in missing)
                          + "`, or fetch the URL by hand to the path shown (or pass --lpips-weights/--fid-weights):",
                          markup=False, highlight=False)
            for r in missing:
                console.print(f"  {r['name']}: {r['url']}", markup=False, highlight=False)

    emit(record, as_json, show)


def register(app: typer.Typer) -> None:
    """Add `splitlab weights` to the app."""
    app.command("weights")(handles_errors(weights_command))
