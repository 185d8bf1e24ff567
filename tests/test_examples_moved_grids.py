"""The checks nbs/05d_grids' examples moved out (issue 58, item 5): a grid of several variants refused by encoding,
the parameter count, the beyond and task grids, the budgets' steps and the start-token arm, the modern-positions
grids' seeds, task variants and DroPE parents, checked here on the library; the checks on the chapter's trained runs
stay in its hidden cells."""

import pytest

from posenc_nb.checkpoint import run_dir
from posenc_nb.config import TRAIN_PRESETS, TrainConfig
from posenc_nb.encodings import ENCODINGS
from posenc_nb.grids import (
    Grid,
    beyond_grid,
    budget_grid,
    budget_steps_of,
    model_parameters,
    model_size_variants,
    modern_grids,
    start_token_grid,
    task_grid,
)
from posenc_nb.model import TransformerLM
from posenc_nb.parameters import PROFILES

tiny = dict(
    TRAIN_PRESETS["smoke"],
    n_layer=1,
    n_head=2,
    d_model=32,
    seq_len=32,
    batch_size=4,
    max_steps=3,
    warmup_steps=1,
    eval_interval=10,
    eval_batches=1,
    checkpoint_interval=10,
)
smoke = PROFILES["smoke"]


def test_runs_by_encoding_refuses_a_grid_of_several_variants():
    with pytest.raises(ValueError, match="a grid of one variant"):
        Grid(tiny, {"a": {}, "b": {}}, ["nopos"], [0]).runs_by_encoding()


def test_model_parameters_counts_without_weights_and_a_smaller_size_has_fewer():
    small = dict(tiny, max_steps=30, warmup_steps=5)
    sizes = model_size_variants(small, {"half": dict(d_model=16), "core": dict(d_model=32)}, "shakespeare")
    half, core = TrainConfig.from_dict({**small, **sizes["half"]}), TrainConfig.from_dict(small)
    assert model_parameters(half) == TransformerLM(half.model_config()).num_params()
    assert model_parameters(half) < model_parameters(core)


def test_the_beyond_grid_trains_every_encoding_and_the_task_grid_a_variant_per_task():
    assert set(beyond_grid(tiny, "shakespeare", None, [0]).encodings) == set(ENCODINGS)
    tasks = task_grid(smoke["task_settings"], ["repeat", "copy"], ["nopos"], [0]).configs()
    assert {key: cfg.task for key, cfg in tasks.items()} == {
        ("repeat", "nopos", 0): "repeat",
        ("copy", "nopos", 0): "copy",
    }


def test_budgets_given_are_sorted_and_the_start_token_arm_sets_its_field():
    assert budget_steps_of(dict(tiny, max_steps=80), [160, 20, 80]) == [20, 80, 160]
    started = start_token_grid(tiny, "shakespeare", ["nopos"], [0]).configs()[("start token", "nopos", 0)]
    budgets = budget_grid(dict(tiny, max_steps=80), "shakespeare", [20, 80], ["nopos"], [0]).configs()
    assert (started.start_token, [c.max_steps for c in budgets.values()]) == (True, [20, 80])


def test_the_modern_grids_seeds_task_variants_and_drope_parents():
    modern = modern_grids(dict(smoke, modern_settings=dict(n_layer=4)))
    lm_references = [(g.encodings, g.seeds) for g in modern["lm"][1::2]]
    assert lm_references == [(["nopos"], smoke["seeds"]), (["alibi"], smoke["seeds"][:1])]
    # two layers: the 2nd is the last, trained once
    assert list(modern["task"][0].variants) == ["RoPE", "NoPos every 2nd layer"]
    children = [cfg for grid in modern["drope"] for cfg in grid.configs().values()]
    parents = {run_dir(cfg).name for grid in (modern["lm"][0], modern["task"][0]) for cfg in grid.configs().values()}
    assert {child.parent for child in children} <= parents
    assert {child.pos_encoding for child in children} == {"nopos"}
