import os

import pytest
import torch

WORKER = os.environ.get("PYTEST_XDIST_WORKER")
"""Set in each worker process of `pytest -n N` (pytest-xdist): N workers share the cores, so each runs torch
on one thread, and so do the programs its tests start (they inherit the environment)."""
if WORKER:
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


@pytest.fixture(autouse=True)
def _few_threads():
    """Keep CPU tests predictable on small CI machines: at most two threads, one per parallel worker."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1 if WORKER else min(threads, 2))
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
