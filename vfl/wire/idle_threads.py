"""How a wire party's idle torch threads wait: asleep, not spinning.

The parties of a session take turns: while one computes, the other waits on its socket. GNU OpenMP (torch's
intra-op pool on Linux) keeps a finished parallel region's threads spinning for a while by default; in a
waiting party they spin on the cores the computing party needs, and its own parallel regions then wait for a
descheduled thread. `OMP_WAIT_POLICY=PASSIVE` puts them to sleep at once (measured on 2 cores, 2 threads a
side: a CNN epoch over TCP 2.07 s -> 1.06 s, docs/benchmarks.md). The arithmetic is the same, so the numbers
are too. OpenMP reads the variable when torch loads, so it is set before any import of torch, and only for
the programs of a session (in one process, torch's default serves better). A value the user set is kept.
"""
from __future__ import annotations

import os

POLICY = "OMP_WAIT_POLICY"


def is_wire_party(argv: list[str]) -> bool:
    """Whether the command `argv` (without the program name) runs a party of a session over TCP."""
    if argv[:1] in (["serve"], ["client"]):
        return True
    return any(a == "--transport=tcp" or (a == "--transport" and argv[i + 1:i + 2] == ["tcp"])
               for i, a in enumerate(argv))


def sleep_when_idle() -> None:
    """Idle OpenMP threads sleep (unless the user chose otherwise); call before torch is imported."""
    os.environ.setdefault(POLICY, "PASSIVE")
