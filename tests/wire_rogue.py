"""A client that passes the handshake (it holds party 0's key) and then misbehaves; run by tests/test_wire_runs.py.

    python tests/wire_rogue.py MODE HOST:PORT SECRET_FILE

MODE: nan (activations full of NaN), shape (activations one column too narrow), oversize (a header declaring
twice the batch's rows), overlong (a header declaring the batch's rows, then a payload of twice as many),
huge (finite activations of 3e38, which drive the server's loss past float32's range), silent (never answers). It exits when the server drops it, or after 60 s.
"""
import sys
import time

import torch

from vfl.training import TrainConfig
from vfl.wire.client import introduction
from vfl.wire.frames import Allow, Expect, Frame, Kind
from vfl.wire.handshake import join, parse_address
from vfl.wire.keys import read_secret

mode, address, secret_file = sys.argv[1:4]
host, port = parse_address(address, "--connect")
config = TrainConfig(arch="small-mlp")
channel = join(host, port, read_secret(secret_file), 0, 1, introduction(config, 0, 4000, 1000), 20).channel
try:
    batch = channel.receive(Expect(Allow(Kind.BATCH, torch.int64, (), rows=(1, 64))))
    rows = len(batch.tensor)
    if mode == "nan":
        channel.send(Frame(Kind.ACTIVATIONS, batch.step, torch.full((rows, 10), float("nan"))))
    elif mode == "huge":
        channel.send(Frame(Kind.ACTIVATIONS, batch.step, torch.full((rows, 10), 3e38)))
    elif mode == "shape":
        channel.send(Frame(Kind.ACTIVATIONS, batch.step, torch.zeros(rows, 9)))
    elif mode == "oversize":
        channel.send(Frame(Kind.ACTIVATIONS, batch.step, torch.zeros(2 * rows, 10)))
    elif mode == "overlong":                    # the header of rows x 10, the bytes of 2 * rows x 10
        header = Frame(Kind.ACTIVATIONS, batch.step, torch.zeros(rows, 10)).header()
        channel.sock.sendall(header + bytes(2 * rows * 10 * 4) + bytes(32))
    else:
        time.sleep(60)
    channel.receive(Expect())                   # the server's ABORT (or its connection closing) ends this
except Exception as exc:                        # noqa: BLE001 - whatever the server did, this peer is done
    print(f"rogue: {exc}", file=sys.stderr)
finally:
    channel.close()
