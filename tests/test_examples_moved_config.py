"""The checks nbs/02d_config's examples moved out (issue 58, item 5): the chapter shows each rule once; every value
it refuses, and the identities older runs keep, are checked here on the library."""

import re
from dataclasses import fields, replace

import pytest

from posenc_nb.config import (
    _RULES,
    _split_problem,
    RUNTIME_KEYS,
    ConfigError,
    TrainConfig,
    _describe,
    _TrainKeys,
    _typed,
    config_hash,
    load_config,
    parse_overrides,
    parse_yaml,
)
from posenc_nb.tasks import TASK_VOCAB_SIZE, task_width
from posenc_nb.special_tokens import EOS_ID
from support import refused


def refusal(make) -> ConfigError:
    "The `ConfigError` that `make()` raises."
    with pytest.raises(ConfigError) as error:
        make()
    return error.value


def test_yaml_lists_and_null():
    assert parse_yaml("[0, 1]") == [0, 1]
    assert parse_yaml("null") is None


@pytest.mark.parametrize(
    "value, hint, expected",
    [
        (None, int | None, None),
        ([16, 32], list[int], [16, 32]),
        ({"d16": {"d_model": 16}}, dict[str, dict], {"d16": {"d_model": 16}}),
        ("last", list[int] | str | None, "last"),
        ([3], list[int] | str | None, [3]),
    ],
)
def test_a_value_of_its_type_passes(value, hint, expected):
    assert _typed(value, hint) == expected


@pytest.mark.parametrize(
    "value, hint",
    [
        (32.5, int),
        (True, int),
        ([0.9], tuple[float, float]),
        ("3", int),
        (float("inf"), float),
        ([16, "32"], list[int]),
        ((16, 32), list[int]),
        ({"d16": 16}, dict[str, dict]),
    ],
)
def test_a_value_of_another_type_is_refused(value, hint):
    with pytest.raises(TypeError):
        _typed(value, hint)


def test_a_refused_type_is_described_in_words():
    assert _describe(list[int] | None) == "a list (each an integer) or null"
    with pytest.raises(TypeError, match="expected a finite number or null, got nan"):
        _typed(float("nan"), float | None)
    with pytest.raises(TypeError, match=re.escape("expected a mapping (each value a mapping), got {'d16': 16}")):
        _typed({"d16": 16}, dict[str, dict])


def test_every_rule_and_runtime_key_names_a_real_key():
    keys = {f.name for f in fields(_TrainKeys)}
    assert set(RUNTIME_KEYS) <= keys
    assert {k for rule_keys, _ in _RULES for k in rule_keys} <= keys


def test_train_config_defaults_and_its_refusals_by_key():
    assert TrainConfig().lr == 1e-3
    assert refusal(lambda: TrainConfig(batch_size=8, grad_accum=2).check_world_size(3)).keys == ["batch_size"]


def test_a_task_asks_for_its_vocabulary_width_and_objective():
    task = dict(task="copy", vocab_size=TASK_VOCAB_SIZE, seq_len=task_width("copy"))
    assert TrainConfig(**task).task == "copy"
    with refused("'repeat'"):
        TrainConfig(**{**task, "task": "repaet"})
    with refused(f"at least {TASK_VOCAB_SIZE} (task 'copy'"):
        TrainConfig(**{**task, "vocab_size": 8})
    with refused(f"set it to at least {task_width('copy')}"):
        TrainConfig(**{**task, "seq_len": 20})
    with refused("use objective=clm"):
        TrainConfig(**task, objective="mlm")
    with refused("tokenizer: /x/tok.json would not be used"):
        TrainConfig(**task, tokenizer="/x/tok.json")


def test_a_seed_fits_in_64_bits():
    with refused("seed: must be an integer in [0, 2**64)"):
        TrainConfig(seed=2**64)


def test_the_start_token_is_the_end_of_text_token_for_a_causal_lm_of_a_corpus_only():
    assert (TrainConfig(start_token=True).model_config().start_token, TrainConfig().model_config().start_token) == (
        EOS_ID,
        None,
    )
    task = dict(task="copy", vocab_size=TASK_VOCAB_SIZE, seq_len=task_width("copy"))
    for other in (dict(objective="mlm"), task):
        with refused("start_token: puts the end-of-text token before"):
            TrainConfig(**other, start_token=True)
    with refused("cannot read the tokenizer file /x/tok.json"):
        TrainConfig(tokenizer="/x/tok.json", start_token=True)


def test_the_model_follows_the_objective_and_the_width():
    assert TrainConfig(objective="mlm").model_config().causal is False
    assert TrainConfig(d_model=64, n_head=2).model_config().d_model == 64


@pytest.mark.parametrize(
    "bad, key",
    [
        (dict(batch_size=30, grad_accum=4), "batch_size"),
        (dict(d_model=100, n_head=3), "model"),
        (dict(lr=float("inf")), "lr"),
        (dict(grad_accum=0), "grad_accum"),
        (dict(vocab_size=100), "vocab_size"),
        (dict(n_layer=0), "n_layer"),
        (dict(betas=(0.9, 1.0)), "betas"),
        (dict(dtype="fp16"), "dtype"),
    ],
)
def test_a_bad_value_is_reported_under_its_key(bad, key):
    assert refusal(lambda: TrainConfig(**bad)).keys == [key]


def test_a_misspelt_preset_is_suggested():
    assert refusal(lambda: TrainConfig.from_preset("smok")).suggestions == {"preset": "smoke"}


def test_overrides_without_a_value_or_of_bad_yaml_are_reported_by_key():
    assert refusal(lambda: parse_overrides(["lr", "seed=1", "x=[1"])).keys == ["lr", "x"]


@pytest.mark.parametrize("content", ["- just\n- a list\n", "lr: [1\n", b"lr: \xff\n"])  # the last: not UTF-8
def test_a_config_file_that_is_no_mapping_of_yaml_is_refused(tmp_path, content):
    path = tmp_path / "run.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    refusal(lambda: load_config(path))


def test_a_missing_config_file_is_refused():
    refusal(lambda: load_config("no/such.yaml"))


@pytest.fixture
def cfg(tmp_path):
    "The chapter's run: a smoke ALiBi run from a file, with an override."
    path = tmp_path / "run.yaml"
    path.write_text("preset: smoke\npos_encoding: alibi\nlr: 1e-3\n")
    return load_config(path, max_steps=12)


def test_runs_from_before_the_later_keys_keep_their_names(cfg):
    assert config_hash(cfg) == config_hash(replace(cfg, pos_options={}))
    assert config_hash(cfg) == config_hash(replace(cfg, start_token=False))
    assert config_hash(cfg) == config_hash(replace(cfg, nopos_layers=None, nopos_options={}, parent=None))
    assert config_hash(cfg) != config_hash(replace(cfg, start_token=True))
    assert config_hash(cfg) != config_hash(replace(cfg, parent="rope-clm-0123456789"))


def test_a_hybrids_layers_and_options_reach_its_model_and_its_name(cfg):
    hybrid = replace(cfg, pos_encoding="rope", n_layer=2, nopos_layers="last", nopos_options=dict(attn_scale=0.1))
    assert (hybrid.model_config().nopos_layers, hybrid.model_config().nopos_options) == ("last", dict(attn_scale=0.1))
    assert config_hash(hybrid) != config_hash(replace(hybrid, nopos_options=None))
    with refused("model: ModelConfig.nopos_layers 'every-3'"):
        replace(cfg, nopos_layers="every-3")


def test_a_task_run_is_another_run(cfg):
    task_cfg = TrainConfig.from_preset(
        "smoke",
        pos_encoding="alibi",
        lr=1e-3,
        max_steps=12,
        task="repeat",
        vocab_size=TASK_VOCAB_SIZE,
        seq_len=task_width("repeat"),
    )
    assert config_hash(cfg) != config_hash(task_cfg)


def test_the_chapters_runs_keep_their_folders():
    spelt_out = TrainConfig(
        model="cpu-tiny",
        seq_len=64,
        batch_size=8,
        lr=3e-3,
        min_lr=3e-4,
        warmup_steps=5,
        max_steps=30,
        eval_interval=10,
        eval_batches=2,
        log_interval=5,
        checkpoint_interval=10,
        pos_encoding="alibi",
    )
    assert config_hash(TrainConfig.from_preset("example", pos_encoding="alibi")) == config_hash(spelt_out)


def test_a_batch_that_does_not_split_says_what_would():
    assert _split_problem(8, 2, world_size=3) == (
        "8 does not split into 3 processes x grad_accum 2 equal micro-batches; make it a multiple of 6 or change "
        "grad_accum"
    )
