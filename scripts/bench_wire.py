"""Time per epoch of split learning over TCP against in process, for the CNN and MLP clients, plain (every
frame HMAC-SHA256-authenticated) and over TLS, with the bytes and frames that cross the wire per epoch. The
in-process run is `splitlab train`'s epoch loop; the TCP runs are `splitlab train --transport tcp`'s: the
server in this process, the client in a `splitlab client` process on 127.0.0.1 at the same torch thread
count (TLS with a throwaway self-signed certificate; needs the `openssl` program, else `--no-tls`). An
epoch is its training rounds and its test-set inference queries (the epoch-end checkpoints are outside it,
as in process). Every run must end with the in-process run's weights; the script checks it. Each side runs as
the lab runs it: the TCP programs with idle OpenMP threads spinning briefly, then asleep (`vfl.wire.idle_threads`,
set in this process before torch loads; `--spins N` another count of spins for them, 0 sleeps at once), the
in-process baseline in a child process with torch's default (as `splitlab train`). Run it on a quiet machine:
timings on a shared one mean little.

    python scripts/bench_wire.py --threads 2                        # cnn and mlp, 3 epochs each
    python scripts/bench_wire.py --threads 2 --spins 0              # the wire's idle threads asleep at once
    python scripts/bench_wire.py --archs small-mlp --epochs 1       # a check that it works
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vfl.wire.idle_threads import POLICY, SPINS, sleep_when_idle  # noqa: E402

USER_WAIT = {k: os.environ[k] for k in (POLICY, SPINS) if k in os.environ}
if "--in-process-child" not in sys.argv:
    if "--spins" in sys.argv:               # read before torch loads (argparse declares it below)
        os.environ[SPINS] = sys.argv[sys.argv.index("--spins") + 1]
    sleep_when_idle()                       # this process is the TCP runs' server, as `splitlab train --transport tcp`

import torch  # noqa: E402

from vfl.runs import Run  # noqa: E402
from vfl.runtime import generator, hardware, resolve_device  # noqa: E402
from vfl.training import TrainConfig, build_parties, fit, load_data  # noqa: E402
from vfl.wire.launch import train_over_tcp  # noqa: E402
from vfl.wire.tls import TlsFiles, self_signed  # noqa: E402


def in_process(config: TrainConfig) -> tuple[list[float], dict[str, torch.Tensor]]:
    """Seconds of each epoch in process, and the final weights."""
    device = resolve_device(config.device)
    train, test = load_data(config)
    client, server = build_parties(config, device, train.images)
    state = fit(client, server, train, test, config, device, generator(config.seed), progress=False)
    return state.epoch_seconds, {**client.model.state_dict(), **{f"top.{k}": v for k, v in server.model.state_dict().items()}}


def in_process_child(config: TrainConfig, folder: Path) -> tuple[list[float], dict[str, torch.Tensor]]:
    """`in_process` in a child process with OpenMP's wait policy as the user's (torch's default unless set)."""
    env = {k: v for k, v in os.environ.items() if k not in (POLICY, SPINS)} | USER_WAIT
    out = folder / f"{config.arch}-in-process.pt"
    subprocess.run([sys.executable, __file__, "--in-process-child", str(out), "--archs", config.arch, "--epochs",
                    str(config.epochs), "--batch-size", str(config.batch_size), "--threads",
                    str(torch.get_num_threads())], env=env, check=True)
    saved = torch.load(out, weights_only=True)
    return saved["seconds"], saved["weights"]


def over_tcp(config: TrainConfig, folder: Path, tls: TlsFiles = TlsFiles()) -> tuple[list[float], list[dict],
                                                                                   dict[str, torch.Tensor]]:
    """Seconds, traffic (as the server counts it) of each epoch over TCP, and the final weights."""
    with Run.create("train", {"train": config, "transport": "tcp"}, folder) as run:
        trained, wire = train_over_tcp(config, run, progress=False, tls=tls)
    weights = {**trained.client.model.state_dict(), **{f"top.{k}": v for k, v in trained.server.model.state_dict().items()}}
    return wire["epoch_seconds"], wire["traffic_per_epoch"], weights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default="cnn,mlp", help="comma-separated architectures (default cnn,mlp)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs per run (default 3; the median is reported)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch threads, both sides (default: torch's)")
    parser.add_argument("--spins", default=None, help="GOMP_SPINCOUNT of the TCP programs (default: the wire's, "
                        "vfl.wire.idle_threads); 0: idle threads sleep at once")
    parser.add_argument("--no-tls", action="store_true", help="skip the runs over TLS")
    parser.add_argument("--in-process-child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.in_process_child is not None:
        config = TrainConfig(arch=args.archs, epochs=args.epochs, batch_size=args.batch_size, device="cpu")
        seconds, weights = in_process(config)
        torch.save({"seconds": seconds, "weights": weights}, args.in_process_child)
        return
    print(hardware(torch.device("cpu")))
    print(f"torch threads: {torch.get_num_threads()} (the TCP client process runs with the same count); "
          f"OpenMP waits: {POLICY} {os.environ.get(POLICY)}, {SPINS} {os.environ.get(SPINS)} over TCP; "
          f"{USER_WAIT or 'torch default'} in process")
    header = ("arch", "in process s/epoch", "TCP s/epoch", "TCP/in process", "TLS s/epoch", "TLS/in process",
              "MiB to server", "MiB to client", "frames to server", "frames to client", "same weights")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-wire-") as tmp:
        tls = None if args.no_tls else self_signed(Path(tmp))
        for arch in args.archs.split(","):
            config = TrainConfig(arch=arch, epochs=args.epochs, batch_size=args.batch_size, device="cpu")
            local_seconds, local_weights = in_process_child(config, Path(tmp))
            tcp_seconds, traffic, tcp_weights = over_tcp(config, Path(tmp) / f"{arch}-tcp")
            tls_seconds, _, tls_weights = over_tcp(config, Path(tmp) / f"{arch}-tls", tls) if tls else ([], {}, {})
            same = all(local_weights.keys() == w.keys() and all(torch.equal(local_weights[k], w[k]) for k in w)
                       for w in (tcp_weights, *([tls_weights] if tls else [])))
            local, tcp = statistics.median(local_seconds), statistics.median(tcp_seconds)
            over_tls = statistics.median(tls_seconds) if tls else None
            last = traffic[-1]
            rows.append((arch, f"{local:.3f}", f"{tcp:.3f}", f"{tcp / local:.2f}x",
                         f"{over_tls:.3f}" if tls else "-", f"{over_tls / local:.2f}x" if tls else "-",
                         f"{last['bytes_received'] / 2**20:.1f}", f"{last['bytes_sent'] / 2**20:.1f}",
                         str(last["frames_received"]), str(last["frames_sent"]), "yes" if same else "NO"))
            print(f"{arch}: in process {['%.3f' % s for s in local_seconds]} s, TCP {['%.3f' % s for s in tcp_seconds]}"
                  f" s, TLS {['%.3f' % s for s in tls_seconds]} s", flush=True)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for line in (header, *rows):
        print(" | ".join(cell.ljust(w) for cell, w in zip(line, widths)))
    if any(r[-1] != "yes" for r in rows):
        sys.exit("the TCP run did not end with the in-process run's weights")


if __name__ == "__main__":
    main()
