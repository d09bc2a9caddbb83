import pytest
import torch


@pytest.fixture(autouse=True)
def _few_threads():
    """Keep CPU tests predictable on small CI machines."""
    threads = torch.get_num_threads()
    torch.set_num_threads(min(threads, 2))
    yield
    torch.set_num_threads(threads)
