import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny networks: one intra-op thread avoids contention on a busy machine (it is many
    times faster there), and keeps the numbers independent of the core count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
