"""Hostile files, folders and networks: each case must exit 2 with one line on stderr holding a stable
part of the message, write nothing (the run directory, data root and weights cache stay as they were),
and end within its time limit: a silent network is bounded by --timeout, not by the test.

The table is named by behaviour; add a row for every hostile input a command must refuse. Network rows
point urllib at local sockets on 127.0.0.1 through $HTTPS_PROXY / $HTTP_PROXY (no request leaves the
machine); below the table, unit tests of `vfl.download` against a local HTTP server."""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.server
import io
import json
import os
import socket
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import torch
from typer.testing import CliRunner

from splitlab.cli import app
from vfl import data as datasets
from vfl import download as dl
from vfl.errors import SplitlabError
from vfl.runs import Run
from vfl.training import TrainConfig, TrainedSplit, build_parties, save_checkpoint

runner = CliRunner()
TIMEOUT = 1                 # --timeout of the network rows
NETWORK_LIMIT = TIMEOUT + 4  # seconds a network row may take in all (the command's own work is well under 1 s)


# --------------------------------------------------------------------------- hostile things on disk

def _checkpoint(tmp: Path) -> bytes:
    config = TrainConfig(arch="small-mlp", device="cpu")
    client, server = build_parties(config, torch.device("cpu"))
    save_checkpoint(tmp / "good.pt", TrainedSplit(config, client, server, 0.5))
    blob = (tmp / "good.pt").read_bytes()
    (tmp / "good.pt").unlink()
    return blob


def _checkpoint_file(tmp: Path) -> None:
    (tmp / "good.pt").write_bytes(_checkpoint(tmp))


def truncated_checkpoint(tmp: Path) -> None:
    blob = _checkpoint(tmp)
    (tmp / "ck.pt").write_bytes(blob[: len(blob) * 2 // 3])


def checkpoint_with_a_flipped_byte(tmp: Path) -> None:
    blob = bytearray(_checkpoint(tmp))
    blob[len(blob) // 2] ^= 0xFF                # inside a weight tensor: torch alone would load it
    (tmp / "ck.pt").write_bytes(bytes(blob))


def _idx_bytes(dims: tuple[int, ...], payload: bytes) -> bytes:
    """An MNIST idx file: a big-endian header (uint8 type, the dimensions), then the data."""
    return bytes([0, 0, 8, len(dims)]) + b"".join(d.to_bytes(4, "big") for d in dims) + payload


def _idx(path: Path, dims: tuple[int, ...], payload: bytes) -> None:
    path.write_bytes(_idx_bytes(dims, payload))


def _mnist(tmp: Path, n_images: int = 128, labels: bytes | None = None) -> Path:
    raw = tmp / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    labels = bytes(i % 10 for i in range(n_images)) if labels is None else labels
    for prefix in ("train", "t10k"):
        _idx(raw / f"{prefix}-images-idx3-ubyte", (n_images, 28, 28), bytes(n_images * 28 * 28))
        _idx(raw / f"{prefix}-labels-idx1-ubyte", (len(labels),), labels)
    return raw


def more_labels_than_images(tmp: Path) -> None:
    _mnist(tmp, n_images=120, labels=bytes(i % 10 for i in range(200)))


def a_label_of_200(tmp: Path) -> None:
    _mnist(tmp, labels=bytes([*range(10)] * 12 + [200] + [0] * 7))


def users_folder_with_its_own_config(tmp: Path) -> None:
    (tmp / "run").mkdir()
    (tmp / "run" / "config.json").write_text('{"my": "experiment"}')
    (tmp / "run" / "results.csv").write_text("a,b\n1,2\n")


def finished_run_holding_a_users_file(tmp: Path) -> None:
    with Run.create("train", {}, tmp / "run") as run:
        run.write_metrics({"accuracy": 0.5})
    (tmp / "run" / "notes.txt").write_text("mine")


# --------------------------------------------------------------------------- hostile networks

class SilentServer:
    """Accepts every connection on 127.0.0.1 and never answers (a proxy or server that hangs)."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.accepted.append(self.sock.accept()[0])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        for conn in [*self.accepted, self.sock]:
            conn.close()


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (connections are refused at once)."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return sock.getsockname()[1]


def use_proxy(monkeypatch, port: int) -> None:
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{port}")
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def no_proxy(monkeypatch) -> None:
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def network(monkeypatch):
    """How a row's network misbehaves: `network(kind)` for kind in silent, refused, no-dns, stuck-dns."""
    silent, released = [], threading.Event()

    def make(kind: str) -> None:
        if kind == "silent":
            silent.append(SilentServer())
            use_proxy(monkeypatch, silent[-1].port)
        elif kind == "refused":
            use_proxy(monkeypatch, closed_port())
        elif kind == "no-dns":
            no_proxy(monkeypatch)

            def no_name(*args, **kwargs):
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            monkeypatch.setattr(socket, "getaddrinfo", no_name)
        elif kind == "stuck-dns":                 # a resolver that never answers: no socket timeout applies
            no_proxy(monkeypatch)

            def stuck(*args, **kwargs):
                released.wait(30)
                raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
            monkeypatch.setattr(socket, "getaddrinfo", stuck)
        else:
            raise AssertionError(kind)

    yield make
    released.set()
    for server in silent:
        server.close()


# --------------------------------------------------------------------------- the table

@dataclass(frozen=True)
class Case:
    name: str                                      # the behaviour, as the test id
    args: list[str]
    message: str                                   # a stable part of the one line on stderr
    files: Callable[[Path], None] | None = None    # hostile files the command meets
    network: str | None = None                     # how the network misbehaves (the `network` fixture)
    writes_run: bool = True                        # the command takes --out (evaluate, datasets, weights do not)


TRAIN = ["train", "--arch", "small-mlp", "--epochs", "1"]
UNSPLIT = ["attack", "unsplit", "--arch", "small-mlp", "--epochs", "1", "--preset", "quick"]
MNIST = ["--dataset", "mnist", "--data-root", "{tmp}/data"]
DATASETS = ["datasets", "--download", "mnist", "--data-root", "{tmp}/data", "--timeout", str(TIMEOUT)]
WEIGHTS = ["weights", "--download", "fid", "--timeout", str(TIMEOUT)]
UNREACHABLE_MNIST = ("download https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz elsewhere "
                     "and copy it, unpacked, into {tmp}/data/MNIST/raw, or pass --data-root")
UNREACHABLE_FID = ("download https://github.com/mseitzer/pytorch-fid/releases/download/fid_weights/"
                   "pt_inception-2015-12-05-6726825d.pth elsewhere and put it at {tmp}/torch/hub/checkpoints/"
                   "pt_inception-2015-12-05-6726825d.pth, or pass --fid-weights FILE")

CASES = [
    # run directories: --overwrite replaces only what splitlab wrote
    Case("overwrite-refuses-a-folder-with-the-users-own-config-json", TRAIN + ["--overwrite"],
         "run directory {tmp}/run is not empty and was not written by splitlab (no .splitlab-run.json)",
         users_folder_with_its_own_config),
    Case("overwrite-refuses-a-run-directory-holding-a-users-file", TRAIN + ["--overwrite"],
         "holds {tmp}/run/notes.txt, which splitlab did not write", finished_run_holding_a_users_file),
    Case("out-name-too-long-for-the-file-system", TRAIN + ["--out", "{tmp}/" + "x" * 300],
         "...(300 characters) has a folder name too long for the file system (at most 255 bytes); pass a shorter --out"),
    Case("data-root-name-too-long-for-the-file-system", TRAIN + ["--dataset", "mnist", "--data-root", "{tmp}/" + "x" * 300],
         "has a name too long for the file system; pass a shorter --data-root"),
    # checkpoints
    Case("evaluate-refuses-a-checkpoint-name-too-long-for-the-file-system",
         ["evaluate", "--checkpoint", "{tmp}/" + "x" * 300 + ".pt"], "(File name too long); pass --checkpoint",
         writes_run=False),
    Case("evaluate-refuses-a-truncated-checkpoint", ["evaluate", "--checkpoint", "{tmp}/ck.pt"],
         "checkpoint {tmp}/ck.pt is truncated or corrupt", truncated_checkpoint, writes_run=False),
    Case("unsplit-refuses-a-truncated-checkpoint", ["attack", "unsplit", "--checkpoint", "{tmp}/ck.pt"],
         "checkpoint {tmp}/ck.pt is truncated or corrupt", truncated_checkpoint),
    Case("evaluate-refuses-a-checkpoint-with-a-flipped-byte", ["evaluate", "--checkpoint", "{tmp}/ck.pt"],
         "checkpoint {tmp}/ck.pt is corrupt (its archive/data/", checkpoint_with_a_flipped_byte, writes_run=False),
    # data: refused at load time, before the run directory
    Case("train-refuses-idx-files-with-200-labels-for-120-images", TRAIN + MNIST,
         "{tmp}/data/MNIST/raw/train-labels-idx1-ubyte holds 200 labels but {tmp}/data/MNIST/raw/train-images-idx3-ubyte "
         "holds 120 images", more_labels_than_images),
    Case("train-refuses-an-idx-label-of-200", TRAIN + MNIST,
         "{tmp}/data/MNIST/raw/train-labels-idx1-ubyte holds label 200, outside mnist's classes 0-9", a_label_of_200),
    Case("unsplit-refuses-an-idx-label-of-200", UNSPLIT + MNIST, "holds label 200, outside mnist's classes",
         a_label_of_200),
    Case("evaluate-refuses-an-idx-label-of-200-given-by-data-root",
         ["evaluate", "--checkpoint", "{tmp}/ck.pt", "--data-root", "{tmp}/data"], "holds label 200",
         lambda tmp: (a_label_of_200(tmp), _mnist_checkpoint(tmp)), writes_run=False),
    # downloads: every failure of the network ends within --timeout, in one line naming the fix
    Case("datasets-download-through-a-proxy-that-never-answers", DATASETS,
         f"cannot reach ossci-datasets.s3.amazonaws.com through proxy 127.0.0.1:{{port}} (no answer within {TIMEOUT} s): "
         + UNREACHABLE_MNIST, network="silent", writes_run=False),
    Case("datasets-download-with-the-connection-refused", DATASETS,
         "cannot reach ossci-datasets.s3.amazonaws.com or yann.lecun.com through proxy 127.0.0.1:{port} "
         "(connection refused): " + UNREACHABLE_MNIST, network="refused", writes_run=False),
    Case("datasets-download-without-name-lookup", DATASETS,
         "cannot reach ossci-datasets.s3.amazonaws.com or yann.lecun.com (name lookup failed: Name or service not "
         "known): " + UNREACHABLE_MNIST, network="no-dns", writes_run=False),
    Case("datasets-download-with-a-resolver-that-never-answers", DATASETS,
         f"cannot reach ossci-datasets.s3.amazonaws.com (no answer within {TIMEOUT} s): " + UNREACHABLE_MNIST,
         network="stuck-dns", writes_run=False),
    Case("weights-download-through-a-proxy-that-never-answers", WEIGHTS,
         f"cannot reach github.com through proxy 127.0.0.1:{{port}} (no answer within {TIMEOUT} s): " + UNREACHABLE_FID,
         network="silent", writes_run=False),
    Case("weights-download-with-the-connection-refused", WEIGHTS,
         "cannot reach github.com through proxy 127.0.0.1:{port} (connection refused): " + UNREACHABLE_FID,
         network="refused", writes_run=False),
    Case("weights-download-with-a-resolver-that-never-answers", WEIGHTS,
         f"cannot reach github.com (no answer within {TIMEOUT} s): " + UNREACHABLE_FID, network="stuck-dns",
         writes_run=False),
    Case("datasets-download-into-a-data-root-under-a-file", ["datasets", "--download", "mnist", "--data-root",
                                                             "{tmp}/afile/data"],
         "cannot write mnist into {tmp}/afile/data (Not a directory); pass --data-root a writable folder",
         lambda tmp: (tmp / "afile").write_text("mine"), writes_run=False),
    # --timeout itself
    Case("datasets-timeout-zero", ["datasets", "--download", "mnist", "--timeout", "0"], "--timeout must be > 0",
         writes_run=False),
    Case("datasets-timeout-nan", ["datasets", "--download", "mnist", "--timeout", "nan"], "--timeout must be finite",
         writes_run=False),
    Case("weights-timeout-past-a-day", ["weights", "--download", "--timeout", "1e9"], "--timeout must be",
         writes_run=False),
    # the newer attacks' numbers and options
    Case("tgias-refuses-a-server-lr-that-would-overflow", ["hfl", "--attack", "tgias-ro", "--server-lr", "1e300"],
         "--server-lr must be >= 0 and <= 1000"),
    Case("tgias-refuses-more-clients-than-it-can-hold", ["hfl", "--attack", "tgias-ro", "--clients", "100000"],
         "--clients must be >= 1 and <= 10000"),
    Case("tgias-refuses-clients-whose-batches-the-train-split-cannot-fill",
         ["hfl", "--attack", "tgias-ro", "--clients", "5000"], "more than the 4000 of the mnist5k train split"),
    Case("idlg-refuses-fedavg-options-on-a-fedsgd-upload",
         ["hfl", "--attack", "idlg", "--observe", "fedsgd", "--local-epochs", "5", "--local-lr", "0.3"],
         "is a FedAvg client's: it applies to --observe fedavg only"),
    Case("unsplit-refuses-victim-options-beside-a-checkpoint",
         ["attack", "unsplit", "--checkpoint", "{tmp}/good.pt", "--arch", "cnn", "--cut-layer", "3"],
         "describes the model to train, but --checkpoint gives a trained one", files=_checkpoint_file),
    Case("fsha-refuses-a-width-it-cannot-allocate", ["attack", "fsha", "--arch", "mlp", "--width", "16"],
         "more than the 268,435,456 this lab allocates; lower --width"),
]


def _mnist_checkpoint(tmp: Path) -> None:
    config = TrainConfig(dataset="mnist", arch="small-mlp", device="cpu", data_root=str(tmp / "moved"))
    client, server = build_parties(config, torch.device("cpu"))
    save_checkpoint(tmp / "ck.pt", TrainedSplit(config, client, server, 0.5))


def _snapshot(tmp: Path) -> dict:
    """Every file and folder under tmp, with the files' bytes: a refused command must change none."""
    return {p.relative_to(tmp): (p.read_bytes() if p.is_file() else None) for p in sorted(tmp.rglob("*"))}




@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_hostile_input_exits_2_with_one_line_and_writes_nothing(tmp_path, monkeypatch, network, time_limit, case):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    datasets._load_cached.cache_clear()
    if case.files is not None:
        case.files(tmp_path)
    port = ""
    if case.network is not None:
        network(case.network)
        port = os.environ.get("HTTPS_PROXY", "").rsplit(":", 1)[-1]
    before = _snapshot(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in case.args]
    if case.writes_run and "--out" not in args:
        args += ["--out", str(tmp_path / "run")]
    start = time.monotonic()
    result = runner.invoke(app, args)
    seconds = time.monotonic() - start
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert case.message.replace("{tmp}", str(tmp_path)).replace("{port}", port) in lines[0], lines[0]
    assert _snapshot(tmp_path) == before                  # no run directory, download or lock file left
    if case.network is not None:
        assert seconds < NETWORK_LIMIT, seconds


# --------------------------------------------------------------------------- valid input is handled

def test_overwrite_replaces_a_run_it_wrote(tmp_path):
    out = tmp_path / "run"
    first = runner.invoke(app, TRAIN + ["--out", str(out), "--json"])
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, TRAIN + ["--out", str(out), "--overwrite", "--seed", "1", "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads((out / "config.json").read_text())["config"]["train"]["seed"] == 1
    marker = json.loads((out / ".splitlab-run.json").read_text())
    assert {p.name for p in out.iterdir()} == {".lock", ".splitlab-run.json", *marker["files"]}


class _Files(http.server.BaseHTTPRequestHandler):
    """A plain HTTP server, or proxy (it answers absolute URLs too), serving `files` by their last path part.
    `cut` names files whose body stops halfway (the connection closes, as on a dropped network)."""

    files: dict[str, bytes] = {}
    cut: set[str] = set()
    requests: list[str] = []

    def do_GET(self):  # noqa: N802 - the http.server interface
        name = self.path.rsplit("/", 1)[-1]
        self.requests.append(self.path)
        if name not in self.files:
            self.send_error(404, "Not Found")
            return
        body = self.files[name]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2] if name in self.cut else body)
        if name in self.cut:
            self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def http_files():
    """A local HTTP server on 127.0.0.1: (base URL, files dict, cut set, requests list)."""
    handler = type("Handler", (_Files,), {"files": {}, "cut": set(), "requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def _fake_fashion(monkeypatch, handler, n: int = 20) -> dict[str, bytes]:
    """FashionMNIST (torchvision's only mirror is plain http) as small idx files, with their md5s patched in."""
    import torchvision.datasets as tvd

    unpacked = {}
    for prefix in ("train", "t10k"):
        unpacked[f"{prefix}-images-idx3-ubyte"] = _idx_bytes((n, 28, 28), os.urandom(n * 28 * 28))
        unpacked[f"{prefix}-labels-idx1-ubyte"] = _idx_bytes((n,), bytes(i % 10 for i in range(n)))
    resources = []
    for name, body in unpacked.items():
        packed = gzip.compress(body, mtime=0)
        handler.files[name + ".gz"] = packed
        resources.append((name + ".gz", hashlib.md5(packed).hexdigest()))
    monkeypatch.setattr(tvd.FashionMNIST, "resources", resources)
    return unpacked


def test_a_download_through_a_proxy_lands_whole_and_loads(tmp_path, monkeypatch, http_files):
    base, handler = http_files
    unpacked = _fake_fashion(monkeypatch, handler)
    use_proxy(monkeypatch, int(base.rsplit(":", 1)[1]))
    result = runner.invoke(app, ["datasets", "--download", "fashion-mnist", "--data-root", str(tmp_path / "data"),
                                 "--timeout", "5", "--json"])
    assert result.exit_code == 0, result.output
    raw = tmp_path / "data" / "FashionMNIST" / "raw"
    assert {p.name: p.read_bytes() for p in raw.iterdir()} == unpacked      # no .gz, no temporary file
    assert handler.requests[0] == "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/train-images-idx3-ubyte.gz"
    rows = {r["dataset"]: r for r in json.loads(result.stdout)["datasets"]}
    assert rows["fashion-mnist"]["available"] is True
    assert len(datasets.load("fashion-mnist", "test", tmp_path / "data")) == 20
    handler.requests.clear()                                               # everything there: nothing fetched
    assert runner.invoke(app, ["datasets", "--download", "fashion-mnist", "--data-root",
                               str(tmp_path / "data")]).exit_code == 0
    assert handler.requests == []


@pytest.mark.parametrize("fault,message", [
    ("cut", "fashion-mnist.s3-website.eu-central-1.amazonaws.com/t10k-images-idx3-ubyte.gz ended the download after"),
    ("wrong-bytes", "t10k-images-idx3-ubyte.gz gave a file that fails its checksum (md5)"),
    ("missing", "t10k-images-idx3-ubyte.gz answered HTTP 404 Not Found"),
])
def test_a_download_that_fails_halfway_keeps_only_whole_files(tmp_path, monkeypatch, http_files, fault, message):
    base, handler = http_files
    unpacked = _fake_fashion(monkeypatch, handler)
    if fault == "cut":
        handler.cut.add("t10k-images-idx3-ubyte.gz")
    elif fault == "wrong-bytes":
        handler.files["t10k-images-idx3-ubyte.gz"] = b"<html>captive portal</html>"
    else:
        del handler.files["t10k-images-idx3-ubyte.gz"]
    use_proxy(monkeypatch, int(base.rsplit(":", 1)[1]))
    result = runner.invoke(app, ["datasets", "--download", "fashion-mnist", "--data-root", str(tmp_path / "data"),
                                 "--timeout", "5"])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.output
    assert message in result.stderr and "or pass --data-root" in result.stderr
    raw = tmp_path / "data" / "FashionMNIST" / "raw"
    assert {p.name: p.read_bytes() for p in raw.iterdir()} == {       # the two fetched before, whole; no partial
        name: unpacked[name] for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")}


def _tar_gz(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


def _fake_cifar(monkeypatch, handler, base: str, label: int = 3, members: dict[str, bytes] | None = None) -> None:
    """CIFAR10 as one small batch per split in torchvision's pickle format, served by the local server (the
    URL and every md5 patched in); `label` is the last image's label, `members` replaces the archive's."""
    import pickle

    import numpy as np
    import torchvision.datasets as tvd

    def batch(n: int) -> bytes:
        return pickle.dumps({"data": np.zeros((n, 3072), np.uint8), "labels": [i % 10 for i in range(n - 1)] + [label]})

    folder = {"data_batch_1": batch(12), "test_batch": batch(6), "batches.meta": pickle.dumps({"label_names": [
        str(i) for i in range(10)]})}
    md5 = {name: hashlib.md5(body).hexdigest() for name, body in folder.items()}
    archive = _tar_gz(members if members is not None else {f"cifar-10-batches-py/{k}": v for k, v in folder.items()})
    handler.files["cifar-10-python.tar.gz"] = archive
    monkeypatch.setattr(tvd.CIFAR10, "url", f"{base}/cifar-10-python.tar.gz")
    monkeypatch.setattr(tvd.CIFAR10, "tgz_md5", hashlib.md5(archive).hexdigest())
    monkeypatch.setattr(tvd.CIFAR10, "train_list", [["data_batch_1", md5["data_batch_1"]]])
    monkeypatch.setattr(tvd.CIFAR10, "test_list", [["test_batch", md5["test_batch"]]])
    monkeypatch.setattr(tvd.CIFAR10, "meta", {"filename": "batches.meta", "key": "label_names",
                                              "md5": md5["batches.meta"]})


def _cifar(tmp_path):
    return runner.invoke(app, ["datasets", "--download", "cifar10", "--data-root", str(tmp_path / "data"),
                               "--timeout", "5", "--json"])


def test_a_cifar_archive_is_unpacked_beside_its_folder_and_renamed_into_place(tmp_path, monkeypatch, http_files):
    base, handler = http_files
    no_proxy(monkeypatch)
    _fake_cifar(monkeypatch, handler, base)
    result = _cifar(tmp_path)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["cifar-10-batches-py"]    # no archive, no part
    assert len(datasets.load("cifar10", "train", tmp_path / "data")) == 12


@pytest.mark.parametrize("members,message", [
    ({"../outside.txt": b"x"}, "gave an archive that does not unpack (OutsideDestinationError"),
    ({"{tmp}/absolute.txt": b"x"}, "unpacks without its folder cifar-10-batches-py"),   # made relative, inside
    ({"other-folder/x": b"x"}, "unpacks without its folder cifar-10-batches-py"),
])
def test_a_cifar_archive_that_would_write_elsewhere_is_refused(tmp_path, monkeypatch, http_files, members, message):
    base, handler = http_files
    no_proxy(monkeypatch)
    _fake_cifar(monkeypatch, handler, base, members={k.replace("{tmp}", str(tmp_path)): v for k, v in members.items()})
    result = _cifar(tmp_path)
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.output
    assert message in result.stderr and "or pass --data-root" in result.stderr
    assert list(tmp_path.iterdir()) == []                  # nothing outside, nothing inside, no part left


def test_downloaded_cifar_with_a_label_outside_its_classes_is_refused_naming_the_folder(tmp_path, monkeypatch,
                                                                                       http_files):
    base, handler = http_files
    no_proxy(monkeypatch)
    _fake_cifar(monkeypatch, handler, base, label=10)
    result = _cifar(tmp_path)
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.output
    assert f"{tmp_path / 'data' / 'cifar-10-batches-py'} holds label 10, outside cifar10's classes 0-9" in result.stderr


# --------------------------------------------------------------------------- vfl.download

def test_fetch_writes_the_body_and_checks_its_digests(tmp_path, http_files, monkeypatch):
    base, handler = http_files
    no_proxy(monkeypatch)
    handler.files["w.pth"] = body = os.urandom(200_000)
    sha = hashlib.sha256(body).hexdigest()
    dl.download(f"{base}/w.pth", tmp_path / "w", dl.Clock(5), sha256_prefix=sha[:8], md5=hashlib.md5(body).hexdigest())
    assert (tmp_path / "w").read_bytes() == body
    with pytest.raises(dl.DownloadError, match=r"w.pth gave a file that fails its checksum \(sha256\)"):
        dl.download(f"{base}/w.pth", tmp_path / "w", dl.Clock(5), sha256_prefix="00000000")


def test_a_server_that_stops_sending_midway_ends_after_the_timeout(tmp_path):
    """Headers and part of the body, then silence (the socket stays open)."""
    listener = socket.create_server(("127.0.0.1", 0))
    held = []

    def serve():
        conn, _ = listener.accept()
        held.append(conn)
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 100)

    threading.Thread(target=serve, daemon=True).start()
    start = time.monotonic()
    try:
        with pytest.raises(dl.DownloadError) as info, open(tmp_path / "f", "wb") as out:
            dl.fetch(f"http://127.0.0.1:{listener.getsockname()[1]}/f", out, dl.Clock(0.5))
        assert str(info.value).endswith("sent nothing for 0.5 s after 100 bytes")
        assert time.monotonic() - start < 3
    finally:
        for sock in [*held, listener]:
            sock.close()


def test_staged_removes_its_file_on_failure_and_leftovers_of_dead_processes(tmp_path):
    dead = 4_194_304 + 4321                   # above the kernel's largest pid: no such process
    (tmp_path / "cache").mkdir()
    leftover = tmp_path / "cache" / f".w.pth.{dead}.splitlab.part"
    leftover.write_bytes(b"half")
    alive = tmp_path / "cache" / f".w.pth.{os.getppid()}.splitlab.part"   # a live download elsewhere: kept
    alive.write_bytes(b"half")
    someone_elses = tmp_path / "cache" / f".w.pth.{dead}.part"              # not splitlab's name: kept
    someone_elses.write_bytes(b"half")
    with pytest.raises(KeyboardInterrupt), dl.staged(tmp_path / "cache" / "w.pth") as part:
        part.write_bytes(b"half")
        raise KeyboardInterrupt
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted([alive.name, someone_elses.name])
    with pytest.raises(RuntimeError), dl.staged(tmp_path / "new" / "deeper" / "w.pth") as part:
        part.write_bytes(b"half")
        raise RuntimeError
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]       # folders it made are gone too


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), 1e9])
def test_timeouts_that_cannot_bound_a_wait_are_refused(timeout):
    with pytest.raises(SplitlabError, match="--timeout must be"):
        dl.check_timeout(timeout)
