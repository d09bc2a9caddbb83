"""Frames: the protocol's messages as they travel between processes, and the checks a receiver makes.

A frame is a fixed-size header (11 little-endian int64: magic, kind, step, dtype, number of dimensions,
dimensions), then, unless its kind carries none, the payload: a tensor's raw bytes, exactly the declared
shape and dtype (nothing is ever unpickled), then its MAC (`vfl.wire.channel`). The receiver reads the header
first and checks it against its own expectations at this point of the protocol (an `Expect`, built from what
it knows itself, never from what the peer said): the kind, the dtype, the exact shape or a bound on the rows,
the step. Only then does it allocate the declared size and read the payload into it; once the MAC verifies
it checks the values (floats finite, indices in range). A frame failing any check is refused with one line
naming the peer, before it is used.

Server -> client: BATCH (the sample indices of the next training round), CUT_GRADIENT (the party's slice
of dL/dH), QUERY_REQUEST (test-sample indices to send inference activations of), PREDICTION, EPOCH_END
(save your state for epoch `step`), BYE. Client -> server: ACTIVATIONS, QUERY (inference activations),
EPOCH_SAVED. Either way: ABORT, the sender stops; its payload is the reason as text. In the handshake, once
both sides proved the key: HELLO (client -> server, its configuration as JSON) and TERMS (the session's terms,
as JSON). A client that picks its own
batches (FSHA's victim, `splitlab client --kind fsha`) is sent PRIVATE_ROUND (run a round on your next private
batch) in place of BATCH and TARGET_REQUEST (send your evaluation targets' inference activations) in place of
QUERY_REQUEST; neither carries a payload, so the server never names a private sample.
"""
from __future__ import annotations

import enum
import json
import math
import struct
from dataclasses import dataclass
from typing import Any

import torch

from vfl.errors import SplitlabError

MAGIC = 0x53504C5457495232            # "SPLTWIR2": catches a peer that speaks something else, or a desync
MAX_DIMS = 6
HEADER_LEN = 5 + MAX_DIMS
HEADER = struct.Struct(f"<{HEADER_LEN}q")
MAX_REASON = 240                      # bytes of an ABORT's reason
MAX_JSON = 64 * 1024                  # bytes of a HELLO or TERMS


class Kind(enum.IntEnum):
    BATCH = 1
    ACTIVATIONS = 2
    CUT_GRADIENT = 3
    QUERY_REQUEST = 4
    QUERY = 5
    PREDICTION = 6
    EPOCH_END = 7
    EPOCH_SAVED = 8
    BYE = 9
    ABORT = 10
    PRIVATE_ROUND = 11
    TARGET_REQUEST = 12
    HELLO = 13
    TERMS = 14

    @property
    def phrase(self) -> str:
        """The frame as errors name it: "activations", "a cut gradient", ..."""
        name = self.name.lower().replace("_", " ")
        return name if self is Kind.ACTIVATIONS else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


DTYPES: dict[int, torch.dtype | None] = {0: None, 1: torch.float32, 2: torch.int64, 3: torch.uint8}
_CODES = {dtype: code for code, dtype in DTYPES.items()}


@dataclass(frozen=True)
class Frame:
    kind: Kind
    step: int = 0
    tensor: torch.Tensor | None = None

    def fields(self) -> list[int]:
        """The header's fields: magic, kind, step, dtype code, dimensions (-1: no payload), the dimensions."""
        t = self.tensor
        dims = [] if t is None else list(t.shape)
        if len(dims) > MAX_DIMS:
            raise SplitlabError(f"{self.kind.phrase} of {len(dims)} dimensions cannot be framed (at most {MAX_DIMS})")
        if t is not None and t.dtype not in _CODES:
            raise SplitlabError(f"{self.kind.phrase} of {t.dtype} cannot be framed (float32, int64 or uint8 only)")
        code = 0 if t is None else _CODES[t.dtype]
        fields = [MAGIC, int(self.kind), self.step, code, -1 if t is None else len(dims)]
        return fields + dims + [0] * (MAX_DIMS - len(dims))

    def header(self) -> bytes:
        return HEADER.pack(*self.fields())

    @property
    def nbytes(self) -> int:
        """The frame's bytes on the wire, its MAC aside."""
        return HEADER.size + (0 if self.tensor is None else self.tensor.numel() * self.tensor.element_size())


def abort(reason: str) -> Frame:
    """An ABORT frame carrying `reason` (printable ASCII, truncated)."""
    text = "".join(c if 32 <= ord(c) < 127 else "?" for c in reason)[:MAX_REASON]
    return Frame(Kind.ABORT, 0, torch.tensor(list(text.encode("ascii")) or [32], dtype=torch.uint8))


def json_frame(kind: Kind, value: Any) -> Frame:
    """A HELLO or TERMS frame: `value` as JSON bytes."""
    raw = json.dumps(value, separators=(",", ":")).encode()
    if len(raw) > MAX_JSON:
        raise SplitlabError(f"{kind.phrase} of {len(raw):,} bytes cannot be framed (at most {MAX_JSON:,})")
    return Frame(kind, 0, torch.frombuffer(bytearray(raw), dtype=torch.uint8))


def json_allowed(kind: Kind) -> "Allow":
    return Allow(kind, torch.uint8, (), rows=(1, MAX_JSON), step=0)


def json_of(frame: Frame, peer: str) -> dict[str, Any]:
    """A HELLO's or TERMS's JSON object; anything else is refused with one line."""
    try:
        value = json.loads(bytes(memoryview(frame.tensor.numpy())).decode())
    except (UnicodeDecodeError, ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise SplitlabError(f"{peer} sent a malformed {frame.kind.name.lower()}; run the same splitlab on both sides")
    return value


def reason_of(frame: Frame) -> str:
    """An ABORT's reason as one printable line (the peer's text is never trusted to be either)."""
    raw = bytes(frame.tensor.tolist()) if frame.tensor is not None else b""
    return "".join(chr(b) if 32 <= b < 127 else "?" for b in raw).strip() or "no reason given"


def all_finite(tensor: torch.Tensor) -> bool:
    """Whether every value of a floating-point tensor is finite: its smallest and largest values are (a NaN
    anywhere makes both NaN, an infinity is one of them). One reduction pass and no boolean copy: about 8x
    faster than `isfinite(t).all()` on a round's 1.2 MB of activations (0.11 against 0.82 ms of CPU, measured),
    a check each side makes on every frame it receives."""
    if not tensor.numel():
        return True
    low, high = torch.aminmax(tensor)
    return math.isfinite(float(low)) and math.isfinite(float(high))


def fmt(shape) -> str:
    return "x".join(map(str, shape)) or "scalar"


@dataclass(frozen=True)
class Allow:
    """One kind of frame the receiver accepts now. `shape` is exact, or with `rows` = (low, high) the shape
    of one row under a leading dimension of low..high rows. `step`: the step it must carry (None: any).
    `values`: [low, high) for integer payloads."""
    kind: Kind
    dtype: torch.dtype | None = None
    shape: tuple[int, ...] = ()
    rows: tuple[int, int] | None = None
    step: int | None = None
    values: tuple[int, int] | None = None

    def describe(self) -> str:
        if self.dtype is None:
            return "no payload"
        shape = fmt(self.shape) if self.rows is None else \
            f"({self.rows[0]} to {self.rows[1]})x{fmt(self.shape)}" if self.shape else f"{self.rows[0]} to {self.rows[1]}"
        return f"{shape} {str(self.dtype).removeprefix('torch.')}"

    def max_bytes(self) -> int:
        if self.dtype is None:
            return 0
        rows = 1 if self.rows is None else self.rows[1]
        return rows * math.prod(self.shape) * torch.empty((), dtype=self.dtype).element_size()


ABORT_ALLOWED = Allow(Kind.ABORT, torch.uint8, (), rows=(1, MAX_REASON))


class Expect:
    """The frames a receiver accepts at one point of the protocol (an ABORT is always accepted)."""

    def __init__(self, *allowed: Allow):
        self.allowed = {a.kind: a for a in (*allowed, ABORT_ALLOWED)}

    def check_header(self, fields: list[int], peer: str) -> tuple[Allow, int, tuple[int, ...] | None]:
        """The matching `Allow`, the step and the payload shape (None: no payload), or a refusal."""
        if len(fields) != HEADER_LEN or fields[0] != MAGIC:
            raise SplitlabError(f"{peer} sent bytes that are not a splitlab frame; run the same splitlab on "
                                "both sides")
        try:
            kind = Kind(fields[1])
        except ValueError:
            raise SplitlabError(f"{peer} sent a frame of unknown kind {fields[1]}; run the same splitlab on "
                                "both sides") from None
        allow = self.allowed.get(kind)
        if allow is None:
            wanted = " or ".join(k.phrase for k in self.allowed if k is not Kind.ABORT)
            raise SplitlabError(f"{peer} sent {kind.phrase} where it should have sent {wanted}; refused")
        step, code, ndim = fields[2], fields[3], fields[4]
        if allow.step is not None and step != allow.step:
            raise SplitlabError(f"{peer} sent {kind.phrase} for step {step} where step {allow.step} was due; refused")
        if code not in DTYPES or DTYPES[code] != allow.dtype:
            got = str(DTYPES.get(code, f"code {code}")).removeprefix("torch.")
            raise SplitlabError(f"{peer} sent {kind.phrase} as {got}; the handshake allows {allow.describe()}")
        if allow.dtype is None:
            if ndim != -1 or any(fields[5:]):
                raise SplitlabError(f"{peer} sent {kind.phrase} with a malformed shape; refused")
            return allow, step, None
        shape = tuple(fields[5:5 + ndim]) if 0 <= ndim <= MAX_DIMS else None
        if shape is None or any(d < 0 for d in shape) or any(fields[5 + ndim:]):
            raise SplitlabError(f"{peer} sent {kind.phrase} with a malformed shape; refused")
        fits = shape == allow.shape if allow.rows is None else \
            (len(shape) == len(allow.shape) + 1 and shape[1:] == allow.shape and allow.rows[0] <= shape[0] <= allow.rows[1])
        if not fits:
            size = math.prod(shape) * torch.empty((), dtype=allow.dtype).element_size()
            larger = f" ({size:,} bytes; at most {allow.max_bytes():,} allowed)" if size > allow.max_bytes() else ""
            raise SplitlabError(f"{peer} sent {kind.phrase} shaped {fmt(shape)}{larger} at step {step}; the "
                                f"handshake allows {allow.describe()}; refused")
        return allow, step, shape

    @staticmethod
    def check_payload(allow: Allow, tensor: torch.Tensor, step: int, peer: str) -> None:
        if tensor.is_floating_point() and not all_finite(tensor):
            raise SplitlabError(f"{peer} sent {allow.kind.phrase} with non-finite values at step {step}; refused")
        if allow.values is not None and tensor.numel():
            low, high = allow.values
            if int(tensor.min()) < low or int(tensor.max()) >= high:
                raise SplitlabError(f"{peer} sent {allow.kind.phrase} with values outside {low} to {high - 1} "
                                    f"at step {step}; refused")
