"""The plan of a profile's training runs is built from the notebooks' own grids, and its commands train exactly those
runs."""

import contextlib
import io
import os
import re
import shlex
from unittest import mock

import nbformat
import pytest

from posenc_nb import grids
from posenc_nb.config import TrainConfig, config_hash, parse_overrides
from posenc_nb.experiments import EXPERIMENTS, PARTS
from posenc_nb.plan import emulated_bfloat16, plan_script, runs_of, training_plan
from posenc_nb.checkpoint import run_dir
from posenc_nb.files import REPO_ROOT
from posenc_nb.parameters import PROFILE_NOTEBOOKS, PROFILES
from posenc_nb.reproduce import dry_run, experiment_notebooks, main
from posenc_nb.rules import STATEMENTS


SMOKE = PROFILES["smoke"]

# What builds a grid in posenc_nb.grids: the class and every function that returns grids.
GRID_BUILDERS = [
    name
    for name in grids.__all__
    if getattr(grids, name) is grids.Grid
    or "Grid" in str(getattr(getattr(grids, name), "__annotations__", {}).get("return"))
]


def _code(notebook) -> str:
    "The code of a notebook, its cells one after the other."
    return "\n".join(c.source for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code")


def test_every_notebook_gets_its_models_from_its_entry():
    """Each experiment notebook has an entry in posenc_nb.experiments and gets its models from it (what the plan lists),
    never from a grid it builds itself, nor by training by hand."""
    notebooks = experiment_notebooks()
    assert [p.stem for p in notebooks] == list(EXPERIMENTS)  # an entry each, in the order they run
    for notebook in notebooks:
        code = _code(notebook)
        assert re.findall(r"\bexperiment_grids\(\"(\w+)\"", code) == [notebook.stem], notebook.stem
        built = [name for name in GRID_BUILDERS if re.search(rf"\b{name}\(", code)]
        assert not built, f"{notebook.stem} builds grids itself: {built}"
        assert not re.search(r"\b(train|train_runs)\(", code), f"{notebook.stem} trains by hand"


def test_every_notebook_writes_and_decides_what_its_entry_declares():
    """Each notebook's code writes the tables and figures of its entry and imports the rules of the claims it declares
    (the smoke end-to-end test checks the files and claims a run leaves)."""
    for notebook in experiment_notebooks():
        code, entry = _code(notebook), EXPERIMENTS[notebook.stem]
        assert set(re.findall(r"\"(\w+\.csv)\"", code)) == set(entry.tables), notebook.stem
        assert set(re.findall(r"\bout / \"(\w+)\"", code)) == set(entry.figures), notebook.stem
        rules = {
            name for names in re.findall(r"from posenc_nb\.rules import ([\w, ]+)", code) for name in names.split(", ")
        }
        assert rules & set(STATEMENTS) == set(entry.claims), notebook.stem
        assert ("save_claims(" in code) == bool(entry.claims), notebook.stem


def test_the_notebooks_share_the_core_runs():
    """The positive arm's models are core models (NoPos's and, its context use's reference, learned of every seed);
    the start-token notebook adds its arm to the core runs, the gap-against-the-budget notebook the other budgets."""
    smoke = dict(SMOKE, profile="smoke")
    folders = {
        name: {run_dir(cfg).name for grid in entry.trained(smoke) for cfg in grid.configs().values()}
        for name, entry in EXPERIMENTS.items()
    }
    n_seeds = len(SMOKE["seeds"])
    assert len(folders["00_positive_arm"]) == 2 * n_seeds and folders["00_positive_arm"] <= folders["01_extrapolation"]
    assert folders["12_start_token"] & folders["14_gap_budget"] <= folders["01_extrapolation"]  # the core's alone
    # the start-token arm, NoPos and learned every seed
    assert len(folders["12_start_token"] - folders["01_extrapolation"]) == 2 * n_seeds
    # NoPos and learned every seed at each budget but the core's
    assert len(folders["14_gap_budget"] - folders["01_extrapolation"]) == 2 * n_seeds * len(SMOKE["budget_steps"])


def test_the_plan_names_every_notebook():
    "Every experiment notebook has its runs in the plan (the smoke end-to-end test checks they are the runs it trains)."
    plan = training_plan("smoke")
    assert set(plan.notebooks.str.split(", ").explode()) == {p.stem for p in experiment_notebooks()}


@pytest.mark.parametrize("profile", ["paper", "gpu"])
def test_dry_run_checks_and_plans_without_training(profile, tmp_path):
    """A dry run of the GPU-sized profiles succeeds without a GPU, trains nothing, writes nothing, and prints the
    estimate."""
    with (
        mock.patch.dict(os.environ, POSENC_RUNS_DIR=str(tmp_path / "runs")),
        contextlib.redirect_stdout(io.StringIO()) as printed,
    ):
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
        cfg = TrainConfig.from_dict(parse_overrides(words[words.index("--out") + 2 :]))
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
        assert train_module.main(words[words.index("posenc-train") + 1 :]) == 0
    assert calls == [(plan.config.iloc[0], plan.folder.iloc[0])]


def test_each_notebook_is_in_one_part_and_beyond_plans_the_core_models_it_needs():
    """The parts hold every experiment notebook once; run alone on a fresh clone, `beyond` trains the core models
    its notebooks use, which `paper` trains too (run one after the other, the second reuses them)."""
    names = [name for part in PARTS.values() for name in part]
    assert sorted(names) == [p.stem for p in experiment_notebooks()] and len(set(names)) == len(names)
    beyond, paper = (dry_run("smoke", part=part, log=lambda said: None) for part in ("beyond", "paper"))
    core = runs_of(training_plan("smoke"), ["01_extrapolation"])
    shared = set(beyond.run) & set(core.run)
    assert shared and shared <= set(paper.run), shared
    assert set(PROFILE_NOTEBOOKS["quick"]) <= {*PARTS["paper"], *PARTS["probe"]}  # the first look: the paper's


def test_make_reproduce_runs_every_part():
    "`make reproduce`, the README's main job, runs every experiment notebook: no part left out, none picked alone."
    recipe = re.search(r"(?m)^reproduce:.*\n\t(.*)", (REPO_ROOT / "Makefile").read_text()).group(1)
    words = shlex.split(recipe)
    parts = {words[i + 1] for i, word in enumerate(words[:-1]) if word == "--part"}
    assert "posenc-reproduce" in recipe and "--only" not in words and parts in (set(), set(PARTS)), recipe


def test_plan_says_each_parts_minutes_here(capsys):
    "`posenc-reproduce plan` measures a step here and says each part's minutes from a fresh clone, before its commands."
    assert main(["plan", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    said = next(line for line in out.splitlines() if line.startswith("minutes here"))
    parts = ", ".join(rf"{part} about \d+" for part in PARTS)  # every part, in run order
    assert re.search(rf"a core step every \d+ ms, measured, from a fresh clone: {parts}", said), said
    assert out.index("minutes here") < out.index("#!/usr/bin/env bash"), out
    assert main(["plan", "--profile", "quick"]) == 0
    quick = capsys.readouterr().out
    if emulated_bfloat16(PROFILES["quick"]["train_settings"]):  # the first look trains in bfloat16: not on this CPU
        assert "minutes here: not estimated, as this CPU has no native bfloat16" in quick, quick
    else:
        assert re.search(r"from a fresh clone: quick about \d+ ", quick), quick


def test_the_budget_curve_trains_every_seed_at_every_budget():
    """The cpu profile's gap against the budget: NoPos and learned positions, every seed, at its budgets and the core's
    (no 1,000 steps: the regime before positions pay), and nothing else: no start token at the budgets."""
    cpu = PROFILES["cpu"]
    plan = training_plan("cpu")
    budget = plan[plan.notebooks.str.contains("14_gap_budget")]
    seeds = {(enc, steps): set(part.seed) for (enc, steps), part in budget.groupby(["encoding", "steps"])}
    budgets = grids.budget_steps_of(cpu["train_settings"], cpu["budget_steps"])
    assert len(budgets) >= 3 and cpu["train_settings"]["max_steps"] in budgets
    assert seeds == {(enc, steps): set(cpu["seeds"]) for enc in ("nopos", "learned") for steps in budgets}
    assert 1000 not in set(budget.steps)
