import signal

import pytest
import torch

HANG_SECONDS = 60
"""A command still running after this long under `time_limit` is hung (no input may hang a command)."""


@pytest.fixture(autouse=True)
def _few_threads():
    """Keep CPU tests predictable on small CI machines."""
    threads = torch.get_num_threads()
    torch.set_num_threads(min(threads, 2))
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def one_thread():
    """Small models (LeNet, a width-16 ConvNet, batches of 1-8) gain little from intra-op threads, and on a
    shared 2-core CPU two threads waiting on each other cost up to 10x (measured): modules of such tests
    use this fixture."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
