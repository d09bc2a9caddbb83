import pytest
import torch


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
