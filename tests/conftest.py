"""Fixtures every test file may ask for; the values and helpers they share are in support.py."""

import pytest
import torch


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
