"""How a wire party's idle torch threads wait: they spin briefly, then sleep.

The parties of a session take turns: while one computes, the other waits on its socket. GNU OpenMP (torch's
intra-op pool on Linux) keeps a finished parallel region's threads spinning by default for 300,000 turns of
its wait loop (about 6 ms of a core on the 2-core machine of docs/benchmarks.md: 20 ns a turn, measured as the
CPU time a worker burns after each region); in a waiting party they spin on the cores the computing party
needs. Sleeping at once (`OMP_WAIT_POLICY=PASSIVE`) frees the cores but makes every parallel region of the
computing party wake its workers through the kernel (a futex wake, and on a virtual machine the wake-up of an
idle virtual CPU), a fixed cost per region that a training round pays a few hundred times. So the workers
spin for `IDLE_SPINS` turns (about 0.2-0.3 ms): longer than the gap between two operations of one round (the
Python between them), far shorter than a peer's turn, so within a burst of work they stay awake and while
the peer computes they sleep. The arithmetic is the same, so the numbers are too. OpenMP reads the variables
when torch loads, so they are set before any import of torch, and only for the programs of a session (in one
process, torch's default serves better). A value the user set for either variable is kept.
"""
from __future__ import annotations

import os

POLICY = "OMP_WAIT_POLICY"
SPINS = "GOMP_SPINCOUNT"
IDLE_SPINS = "10000"


def is_wire_party(argv: list[str]) -> bool:
    """Whether the command `argv` (without the program name) runs a party of a session over TCP."""
    if argv[:1] in (["serve"], ["client"]):
        return True
    return any(a == "--transport=tcp" or (a == "--transport" and argv[i + 1:i + 2] == ["tcp"])
               for i, a in enumerate(argv))


def sleep_when_idle() -> None:
    """Idle OpenMP threads spin `IDLE_SPINS` turns, then sleep (unless the user chose how they wait); call
    before torch is imported."""
    if POLICY not in os.environ and SPINS not in os.environ:
        os.environ[SPINS] = IDLE_SPINS
