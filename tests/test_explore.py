"""The explorer in a real kernel (its widget detection: what nbdev_test's in-process shell cannot show), and its errors:
what a user is told where a list of runs is empty or a run picked in the menu is damaged."""

import re
from pathlib import Path

import nbformat
import pytest

from posenc_nb.checkpoint import read_meta
from posenc_nb.config import TrainConfig
from posenc_nb.explore import AttentionExplorer, explore
from posenc_nb.reproduce import run_notebook
from posenc_nb.train import train
from support import TINY


def test_a_papermill_kernel_has_no_frontend_but_is_a_kernel(tmp_path, monkeypatch):
    "Under papermill the explorer must fall back to a figure; the same kernel started for a frontend must not."
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)  # as when run from a shell, not from a JupyterLab kernel
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "from posenc_nb.explore import has_frontend\nassert not "
                "has_frontend(), 'papermill has no frontend to show "
                "widgets'\nassert has_frontend(environ={'JPY_SESSION_NAME': 'a.ipynb'}), "
                "'a kernel a Jupyter server started would'"
            )
        ]
    )
    nbformat.write(nb, tmp_path / "detect.ipynb")
    run_notebook(tmp_path / "detect.ipynb", tmp_path / "detect-out.ipynb", {})


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    "A folder of two tiny trained runs, `good` and `damaged` (its weights overwritten at the end, as a bad disk might)."
    root = tmp_path_factory.mktemp("explore-runs")
    cfg = TrainConfig(**{**TINY, "max_steps": 2, "eval_interval": 2, "checkpoint_interval": 2})
    for name in ("good", "damaged"):
        train(cfg, root / name, progress=False)
    weights = root / "damaged" / read_meta(root / "damaged")["files"]["model"]
    weights.write_bytes(weights.read_bytes()[:-4] + b"\xff" * 4)
    return root


def test_an_empty_list_is_not_an_empty_runs_folder(trained, monkeypatch):
    "Before: explore([]) said there were no trained runs under runs/, where there were."
    monkeypatch.setenv("POSENC_RUNS_DIR", str(trained))
    with pytest.raises(ValueError, match=re.escape("explore() was given an empty list of runs")) as error:
        explore([])
    assert f"every trained run under {trained} (2 there)" in str(error.value)
    monkeypatch.setenv("POSENC_RUNS_DIR", str(trained / "none"))
    with pytest.raises(ValueError, match=re.escape(f"no trained runs under {trained / 'none'}")):
        explore()


def test_a_damaged_run_picked_in_the_menu_shows_why(trained, capsys):
    """Before: picking it raised out of the widget's callback (which caught only ValueError), and the last run's figure
    stayed under the new label."""
    box = AttentionExplorer({"good": trained / "good", "damaged": trained / "damaged"}, "The cat sat on the mat")
    assert "pair" in box.view
    capsys.readouterr()
    box.run_menu.value = "damaged"
    weights = trained / "damaged" / read_meta(trained / "damaged")["files"]["model"]
    assert box.view["run"] == "damaged" and "pair" not in box.view, box.view
    assert f"{weights} changed after it was written" in box.view["error"]
    assert box.view["error"] in capsys.readouterr().out  # shown in the output area, in place of the last view
    box.run_menu.value = "good"
    assert box.view["run"] == "good" and "pair" in box.view
