import os
import signal

import pytest
import torch

HANG_SECONDS = 60
"""A command still running after this long under `time_limit` is hung (no input may hang a command)."""

if os.environ.get("PYTEST_XDIST_WORKER"):
    # a worker of `pytest -n N` (pytest-xdist): N workers share the cores, so the programs its tests start
    # run torch on one thread too (they inherit the environment), and inductor builds compiled code in the
    # compiling process rather than starting a pool of worker processes per compiling process (a cold compile
    # took 7 s less CPU so, 61 against 68 s)
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TORCHINDUCTOR_COMPILE_THREADS="1")


SLOW_DEFAULT_SECONDS = 10.0
"""What a test marked plain `slow` is taken to cost (the marker's own threshold)."""


def _seconds(item) -> float:
    marker = item.get_closest_marker("slow")
    return 0.0 if marker is None else float(marker.kwargs.get("seconds", SLOW_DEFAULT_SECONDS))


def pytest_collection_modifyitems(items):
    """Longest first: slow tests by their declared cost (`@pytest.mark.slow(seconds=N)`, N about the seconds the
    test takes alone on a 2-core CPU), then every other test in its usual order. Under `-n auto --dist worksteal`
    (pyproject's addopts) the workers start on the long tests and an idle worker takes the back half of a busy
    one's queue, so the run ends on short tests instead of one worker running a minutes-long test alone at the end."""
    items.sort(key=lambda item: -_seconds(item))          # stable: equal costs keep the collection's order


@pytest.fixture(autouse=True)
def _torch_on_one_thread():
    """Tests run torch on one thread: their models and batches are small, and on a shared 2-core CPU two
    threads waiting on each other cost up to 10x (measured); with one worker per core (`-n auto`) each worker
    gets its core. The whole suite passes at one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def one_thread():
    """Every test runs torch on one thread (`_torch_on_one_thread`); modules that ask for this by name keep it."""
    yield


@pytest.fixture(scope="module")
def mnist():
    """mnist5k's train split (the HFL attacks' client batches)."""
    from vfl import data as datasets
    return datasets.load("mnist5k")


@pytest.fixture(scope="module")
def lenet():
    """DLG's sigmoid LeNet, seed 0 (observations copy it; tests must not change it)."""
    from vfl.models.hfl import build_hfl_model
    return build_hfl_model("lenet", seed=0)


@pytest.fixture
def time_limit():
    """A hung command fails its test (TimeoutError after HANG_SECONDS) instead of holding the suite; a test
    that runs longer on purpose calls `signal.alarm(seconds)` itself."""
    def expire(signum, frame):
        raise TimeoutError(f"the command ran past {HANG_SECONDS} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(HANG_SECONDS)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
