"""Fetching a dataset into the data root (`splitlab datasets --download`): MNIST's and CIFAR-10's archives, the
tabular sets' files from a path or URL, each checked before it takes its real name. `vfl.data.download` is this
module's `download`; the datasets, their files and their checks are `vfl.data`'s."""
from __future__ import annotations

import gzip
import os
import shutil
import tarfile
import zlib
from pathlib import Path
from typing import Callable

from vfl.download import DEFAULT_TIMEOUT, Clock, DownloadError, describe, staged
from vfl.download import download as fetch_file
from vfl.data import _MNIST_FAMILY, _NAMES, ImageData, _idx_header, dataset_spec, default_data_root, load
from vfl.errors import SplitlabError
from vfl.tabular import TabularSource, read_table


def _gunzip(packed: Path, unpacked: Path) -> None:
    with gzip.open(packed) as src, open(unpacked, "wb") as dst:
        shutil.copyfileobj(src, dst)


def _untar(packed: Path, unpacked: Path) -> None:
    with tarfile.open(packed) as archive:
        archive.extractall(unpacked, filter="data")     # no paths outside, no links, no devices


def _unpack(url: str, unpack: Callable[[], None]) -> None:
    """An archive whose checksum matched should unpack; if it does not, say so in the download's words."""
    try:
        unpack()
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DownloadError(url, f"gave an archive that does not unpack ({type(exc).__name__}: {exc})",
                            unreachable=False) from None


def _fetch_mnist(cls, raw: Path, clock: Clock, progress: bool) -> None:
    """Each idx file missing from `raw`, from the first of torchvision's mirrors that answers: the .gz
    (its md5 checked) and the unpacked file (its header checked) both under temporary names until whole."""
    for filename, md5 in cls.resources:
        target = raw / filename.removesuffix(".gz")
        if target.exists():                      # checked, not replaced, by the load that follows
            continue
        errors = []
        for mirror in cls.mirrors:
            if errors and not clock.remaining():   # the network stayed silent: no mirror gets more time
                break
            try:
                with staged(raw / filename) as packed, staged(target) as unpacked:
                    fetch_file(mirror + filename, packed, clock, md5=md5, progress=progress)
                    _unpack(mirror + filename, lambda: _gunzip(packed, unpacked))
                    if isinstance(problem := _idx_header(unpacked), str):
                        raise DownloadError(mirror + filename, f"unpacks to a broken file ({problem})", False)
                    os.replace(unpacked, target)
                break
            except DownloadError as exc:
                errors.append(exc)
        if not target.exists():
            raise _Unfetched(describe(errors), cls.mirrors[0] + filename, raw)


def _fetch_cifar(cls, root: Path, clock: Clock, progress: bool) -> None:
    """The archive (md5 checked), unpacked under a temporary name, then its folder renamed into place."""
    folder = root / cls.base_folder
    if folder.exists():                          # checked (md5) by the load that follows, never replaced
        return
    try:
        with staged(root / cls.filename) as packed, staged(folder) as unpacked:
            fetch_file(cls.url, packed, clock, md5=cls.tgz_md5, progress=progress)
            _unpack(cls.url, lambda: _untar(packed, unpacked))
            if not (unpacked / cls.base_folder).is_dir():
                raise DownloadError(cls.url, f"unpacks without its folder {cls.base_folder}", False)
            os.replace(unpacked / cls.base_folder, folder)
    except DownloadError as exc:
        raise _Unfetched(str(exc), cls.url, root) from None


class _Unfetched(Exception):
    """A file no mirror gave: why, and how to get it by hand."""

    def __init__(self, why: str, url: str, into: Path):
        super().__init__(f"{why}: download {url} elsewhere and copy it, unpacked, into {into}, or pass --data-root "
                         "to a folder that has the files")


def download(name: str, data_root: Path | str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
             progress: bool = False, source: str | None = None) -> ImageData:
    """Fetch a torchvision dataset's missing files into the data root (the only place the lab fetches
    data), then load it. Gives up after `timeout` seconds without data from the network; files already
    there are never replaced (broken ones are named, with the fix)."""
    spec = dataset_spec(name)
    if spec.embedded:
        if source is not None:
            raise SplitlabError(f"--from: {name} ships inside an installed package; it takes no file")
        return load(name, "train", data_root)
    root = Path(data_root) if data_root is not None else default_data_root()
    if spec.tabular is not None:
        return _fetch_tabular(spec.tabular, root, Clock(timeout), progress, source)
    if source is not None:
        raise SplitlabError(f"--from takes the file of a downloaded tabular set (criteo, german-credit); {name} comes "
                            "from torchvision's mirrors")
    cls_name = next(cls for cls, short in _NAMES.items() if short == name)
    import torchvision.datasets as tvd

    clock = Clock(timeout)
    try:
        if cls_name in _MNIST_FAMILY:
            _fetch_mnist(getattr(tvd, cls_name), root / cls_name / "raw", clock, progress)
        else:
            _fetch_cifar(getattr(tvd, cls_name), root, clock, progress)
    except _Unfetched as exc:
        raise SplitlabError(str(exc)) from None
    except OSError as exc:                       # the data root: not writable, a file on the way, disk full
        raise SplitlabError(f"cannot write {name} into {root} ({exc.strerror or exc}); "
                            "pass --data-root a writable folder") from None
    load(name, "test", root)                     # both splits load: the files are whole
    return load(name, "train", root)


def _copy_or_fetch(origin: str, packed: Path, clock: Clock, progress: bool) -> None:
    """`origin` (an http(s) URL, or a local file) into `packed`."""
    if origin.startswith(("http://", "https://")):
        try:
            fetch_file(origin, packed, clock, progress=progress)
        except DownloadError as exc:
            raise SplitlabError(f"{exc}: download it elsewhere and give it with --from PATH") from None
        return
    path = Path(origin).expanduser()
    if not path.is_file():
        raise SplitlabError(f"--from {origin}: no such file (give a path or an http(s) URL)")
    shutil.copyfile(path, packed)


def _unpack_member(packed: Path, unpacked: Path, member: str) -> None:
    """`packed` as it came (a .tar.gz holding `member` anywhere, a .gz, or the file itself) into `unpacked`."""
    if tarfile.is_tarfile(packed):
        with tarfile.open(packed) as archive:
            found = [m for m in archive.getmembers() if m.isfile() and Path(m.name).name == member]
            if not found:
                raise SplitlabError(f"the archive holds no {member}; give the file itself with --from PATH")
            with archive.extractfile(found[0]) as src, open(unpacked, "wb") as dst:
                shutil.copyfileobj(src, dst)
        return
    with open(packed, "rb") as fh:
        gzipped = fh.read(2) == b"\x1f\x8b"
    if gzipped:
        _gunzip(packed, unpacked)
    else:
        shutil.copyfile(packed, unpacked)


def _fetch_tabular(source: TabularSource, root: Path, clock: Clock, progress: bool, origin: str | None) -> ImageData:
    """A downloaded tabular set's file into the data root (`NAME/FILE`), from its address or `origin` (a path or
    URL), unpacked and read whole before it is renamed into place; a file already there is checked, never
    replaced."""
    target = source.path(root)
    if target.exists():
        if origin is not None:
            raise SplitlabError(f"{target} is already there; delete it first to replace it with --from {origin}")
        return load(source.name, "train", root)
    try:
        with staged(target.with_name(target.name + ".packed")) as packed, staged(target) as unpacked:
            _copy_or_fetch(origin or source.url, packed, clock, progress)
            try:
                _unpack_member(packed, unpacked, target.name)
            except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
                raise SplitlabError(f"{origin or source.url} does not unpack ({type(exc).__name__})") from None
            read_table(source, unpacked)                 # refuses a broken file before it takes the real name
            os.replace(unpacked, target)
    except OSError as exc:
        raise SplitlabError(f"cannot write {source.name} into {root} ({exc.strerror or exc}); pass --data-root a "
                            "writable folder") from None
    return load(source.name, "train", root)
