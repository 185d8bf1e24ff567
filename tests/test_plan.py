"The plan of a profile's training runs is what its notebooks train, and its commands train exactly those runs."
import contextlib
import io
import os
import shlex
from pathlib import Path
from unittest import mock

import matplotlib
import nbformat
import numpy as np
import pytest

from posenc_nb.checkpoint import run_dir
from posenc_nb.config import PROFILES, TrainConfig, config_hash, parse_overrides
from posenc_nb.reproduce import experiment_notebooks, main, notebook_parameters, plan_script, training_plan

matplotlib.use("Agg")


def _fake_tokens(corpus, split, vocab_size=2048, **kwargs):
    "A few thousand token ids in place of a corpus: nothing is downloaded or tokenized."
    return np.arange(4096, dtype=np.int64) % vocab_size


def _fake_train(trained: set):
    "A stand-in for `train` that records the run folder it was asked for and returns a placeholder run."
    def train(cfg, out_dir=None, force=False, progress=True):
        trained.add(run_dir(cfg).name)
        run = mock.MagicMock()
        run.name, run.config, run.out_dir = run_dir(cfg).name, cfg, run_dir(cfg)
        return run
    return train


def notebook_trainings(notebook: Path, profile: str, out_dir: Path) -> set[str]:
    """The run folders `notebook`'s own code asks `train` for under `profile`: its cells run here, in order, with training
    recorded instead of done. A cell that fails on a placeholder run skips the rest of that cell: every notebook trains at
    the top of its cells, before it uses the runs."""
    trained = set()
    namespace = dict(notebook_parameters(notebook, dict(PROFILES[profile], profile=profile, out_dir="")),
                     out_dir=str(out_dir), __name__="__main__")
    cells = [c for c in nbformat.read(notebook, as_version=4).cells
             if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", [])]
    with mock.patch("posenc_nb.experiments.train", _fake_train(trained)), \
         mock.patch("posenc_nb.experiments.train_jobs", lambda jobs=None: 1), \
         mock.patch("posenc_nb.tokens.load_tokens", _fake_tokens), \
         mock.patch("posenc_nb.experiments.load_tokens", _fake_tokens), \
         contextlib.redirect_stdout(io.StringIO()):
        for i, cell in enumerate(cells):
            try:
                exec(compile(cell.source, f"{notebook.stem} cell {i}", "exec"), namespace)
            except Exception:
                continue
    matplotlib.pyplot.close("all")
    return trained


def test_smoke_plan_is_what_the_notebooks_train(tmp_path):
    "Per notebook and in all, the smoke plan's run folders are the ones the notebooks' own code asks for."
    plan = training_plan("smoke")
    for notebook in experiment_notebooks():
        planned = set(plan.run[plan.notebooks.str.split(", ").map(lambda names: notebook.stem in names)])
        assert notebook_trainings(notebook, "smoke", tmp_path / notebook.stem) == planned, notebook.stem


@pytest.mark.parametrize("profile", ["paper", "gpu"])
def test_dry_run_checks_and_plans_without_training(profile, tmp_path):
    "A dry run of the GPU-sized profiles succeeds without a GPU, trains nothing, writes nothing, and prints the estimate."
    with mock.patch.dict(os.environ, POSENC_RUNS_DIR=str(tmp_path / "runs")), \
         contextlib.redirect_stdout(io.StringIO()) as printed:
        assert main(["--profile", profile, "--dry-run", "--out", str(tmp_path / "figures")]) == 0
    assert "GPU-hours" in printed.getvalue() and f"{len(training_plan(profile))} training runs" in printed.getvalue()
    assert not (tmp_path / "runs").exists() and not (tmp_path / "figures").exists()


@pytest.mark.parametrize("profile, nproc", [("smoke", 2), ("gpu", 8), ("paper", 8)])
def test_plan_commands_train_the_planned_configs(profile, nproc):
    "Each command of the plan's script reads back, through posenc-train's own parser, as the planned config and folder."
    plan = training_plan(profile)
    commands = [line for line in plan_script(plan, nproc).splitlines() if not line.startswith(("#", "set "))]
    assert len(commands) == len(plan)
    for command, (_, row) in zip(commands, plan.iterrows()):
        words = shlex.split(command)
        assert words[:5] == ["torchrun", "--standalone", f"--nproc-per-node={nproc}", "--no-python", "posenc-train"]
        folder = words[words.index("--out") + 1]
        cfg = TrainConfig.from_dict(parse_overrides(words[words.index("--out") + 2:]))
        assert (cfg, folder, config_hash(cfg)) == (row.config, row.folder, row.config_hash)
        cfg.check_world_size(nproc)


def test_posenc_train_accepts_the_planned_command():
    "`posenc-train` (its `main`) given a planned command's arguments trains that config into that folder."
    from posenc_nb import train as train_module
    plan = training_plan("gpu").head(1)
    words = shlex.split(plan_script(plan, 1).splitlines()[-1])
    calls = []
    fake = lambda cfg, out_dir=None, **kwargs: calls.append((cfg, str(out_dir))) or mock.MagicMock(out_dir=out_dir)
    with mock.patch.object(train_module, "train", fake), contextlib.redirect_stdout(io.StringIO()):
        assert train_module.main(words[words.index("posenc-train") + 1:]) == 0
    assert calls == [(plan.config.iloc[0], plan.folder.iloc[0])]
