"""Fixtures every test file may ask for; the values and helpers they share are in support.py."""

import os

# One torch thread a process, set before torch is imported: pytest-xdist runs a worker a core, and workers of two
# threads each (and the notebooks and commands they start) spin against each other on the same cores; the smoke profile
# took 430 s beside the other worker, against 170 s alone.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "slow: an end-to-end run (the smoke profile, torchrun, the "
        "site in Chromium, the benchmark); -m 'not slow' skips them",
    )


@pytest.fixture
def runs_root(tmp_path, monkeypatch):
    "Runs go to a scratch folder; one thread per process (and for the commands), steadier on a shared 2-core machine."
    monkeypatch.setenv("POSENC_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("POSENC_DEBUG", raising=False)  # errors as the user sees them, not as tracebacks
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tmp_path / "runs"
    torch.set_num_threads(threads)
