"""The checks nbs/01b_model's examples moved out (issue 58, item 5): the chapter shows what the model does, a thing a
cell; its refusals, its initialisation, the shapes of everything it returns, and the options restored after a block
are checked here, on the library."""

import dataclasses
import math
import re
from unittest import mock

import pytest
import torch

from posenc_nb.encodings import ENCODINGS, get_encoding
from posenc_nb.model import (
    AUTOCAST_DTYPES,
    PRESETS,
    ModelConfig,
    SelfAttention,
    TransformerLM,
    check_token_ids,
    encoding_options,
    frozen,
    layer_encodings,
    position_token_ratio,
)
from support import refused


@pytest.fixture
def cfg():
    return ModelConfig(vocab_size=100, n_layer=2, n_head=4, d_model=32, max_len=16, pos_encoding="alibi")


@pytest.fixture
def model(cfg):
    torch.manual_seed(0)
    return TransformerLM(cfg).eval()


def test_configs_saved_before_options_load_with_the_defaults_and_a_preset_is_checked():
    assert ModelConfig().pos_options == {}
    with refused("model preset must be one of gpt3-125m, gpt3-350m"):
        ModelConfig.from_preset("gpt3-7b")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d_model=100, n_head=3), "not divisible by n_head=3"),
        (
            dict(pos_encoding="relative"),
            "ModelConfig.pos_encoding must be one of nopos, learned, sinusoidal, rope, alibi",
        ),
        (dict(pos_encoding="rope", pos_options=dict(bse=1e4)), "rope has no option 'bse' (did you mean 'base'?)"),
        (
            dict(pos_encoding="nopos", pos_options=dict(base=1e4)),
            "nopos has no option 'base'; its options are: attn_scale",
        ),
        (dict(pos_encoding="rope", pos_options=dict(scaling="linear")), "'scaling' must be one of none, pi, ntk, yarn"),
        (dict(pos_options=[("base", 1e4)]), "pos_options must map option names to values"),
        (dict(n_layer=0), "n_layer must be a positive integer"),
        (dict(d_model=-8), "d_model must be a positive integer"),
        (dict(max_len=1.5), "max_len must be a positive integer"),
        (dict(dropout=1.0), "ModelConfig.dropout must lie in [0, 1), got 1.0"),
        (dict(causal="yes"), "causal must be True or False"),
        (
            dict(pos_encoding="rope", nopos_layers="every-5"),
            "ModelConfig.nopos_layers 'every-5': 'every-k' takes a whole k from 2",
        ),
        (dict(pos_encoding="learned", nopos_layers="last"), "where learned puts none; use an encoding that acts there"),
        (dict(pos_encoding="rope", nopos_options=dict(attn_scale=0.1)), "nopos_options would not be used"),
        (
            dict(pos_encoding="rope", nopos_layers=[3], nopos_options=dict(attn_scal=0.1)),
            "(did you mean 'attn_scale'?)",
        ),
    ],
)
def test_a_bad_model_config_is_refused_with_its_message(kwargs, message):
    with pytest.raises(ValueError) as error:
        ModelConfig(**kwargs)
    assert message in str(error.value)


def test_the_fused_path_returns_no_probabilities():
    attn = SelfAttention(ModelConfig(n_head=4, d_model=32)).eval()
    nopos = get_encoding("nopos", d_model=32, n_head=4, max_len=16)
    assert attn(torch.randn(2, 10, 32), nopos, None)[1] is None


def test_the_blocks_start_as_gpt2s_with_the_residual_projections_scaled_down(cfg, model):
    for proj in (model.blocks[0].attn.proj, model.blocks[1].mlp.proj):
        assert proj.weight.std().item() == pytest.approx(0.02 / math.sqrt(2 * cfg.n_layer), abs=1e-3)
    assert not any(b.any() for block in model.blocks for b in (block.attn.qkv.bias, block.mlp.fc.bias))


def test_the_model_returns_every_hidden_state_and_map_on_request_and_none_otherwise(model):
    idx = torch.randint(0, 100, (3, 16))
    with torch.no_grad():
        out, fused = model(idx, output_hidden_states=True, output_attentions=True), model(idx)
    assert [h.shape for h in out.hidden_states] == [(3, 16, 32)] * 3
    assert [a.shape for a in out.attentions] == [(3, 4, 16, 16)] * 2
    assert (fused.hidden_states, fused.attentions) == (None, None)


def test_the_model_refuses_ids_of_the_wrong_shape_or_dtype(model):
    with refused("(batch, length)"):
        model(torch.zeros(4, dtype=torch.long))
    with pytest.raises(Exception, match=re.escape("torch.float32")):
        model(torch.zeros(1, 4))


def test_a_start_token_must_be_in_the_vocabulary():
    with pytest.raises(ValueError, match="start_token"):
        ModelConfig(vocab_size=100, start_token=100)


def test_a_hybrid_has_nopos_layers_that_differ_from_its_rope_twin_and_takes_nopos_options(cfg):
    torch.manual_seed(0)
    hybrid = TransformerLM(dataclasses.replace(cfg, pos_encoding="rope", nopos_layers="every-2")).eval()
    assert [p.name for p in layer_encodings(hybrid)] == ["rope", "nopos"]
    rope_twin = TransformerLM(dataclasses.replace(cfg, pos_encoding="rope")).eval()
    rope_twin.load_state_dict(hybrid.state_dict())
    idx = torch.randint(0, 100, (3, 16))
    with torch.no_grad():
        mixed, rotary = hybrid(idx, output_hidden_states=True), rope_twin(idx, output_hidden_states=True)
    assert not torch.allclose(mixed.hidden_states[2], rotary.hidden_states[2], atol=1e-4)
    warm = TransformerLM(
        dataclasses.replace(
            cfg, pos_encoding="rope", nopos_layers=[1], nopos_options=dict(attn_scale=0.1, floor_scale=4)
        )
    )
    assert layer_encodings(warm)[1].options == dict(attn_scale=0.1, floor_scale=4.0)


def test_a_hybrid_of_one_layer_is_refused(cfg):
    with pytest.raises(ValueError, match=re.escape("or pos_encoding='nopos'")):
        dataclasses.replace(cfg, pos_encoding="rope", nopos_layers="last", n_layer=1)


@pytest.mark.parametrize("encoding", ["rope", "nopos"])
def test_encodings_inside_attention_add_nothing_to_the_embeddings(encoding):
    model = TransformerLM(ModelConfig(vocab_size=500, d_model=64, max_len=128, pos_encoding=encoding))
    assert position_token_ratio(model) == 0.0


def test_ids_past_the_vocabulary_are_named():
    with refused("got ids from 100 to 100"):
        check_token_ids(torch.full((1, 4), 100), 100)
    check_token_ids(torch.zeros(2, 0, dtype=torch.long), vocab_size=100)  # nothing to check


@pytest.mark.parametrize("name", [n for n, c in ENCODINGS.items() if not c.length_limit])
def test_every_encoding_without_a_limit_gives_logits_for_8x_max_len(cfg, name):
    m = TransformerLM(dataclasses.replace(cfg, pos_encoding=name)).eval()
    with torch.no_grad():
        assert m(torch.randint(0, 100, (1, 8 * cfg.max_len))).logits.shape == (1, 8 * cfg.max_len, 100)


def test_encoding_options_are_the_models_within_the_block_and_a_refused_one_changes_nothing(cfg):
    torch.manual_seed(0)
    m = TransformerLM(dataclasses.replace(cfg, pos_encoding="rope")).eval()
    x = torch.randint(0, 100, (2, 4 * cfg.max_len))
    with torch.no_grad():
        plain = m(x).logits
        with encoding_options(m, scaling="yarn", factor=4.0) as scaled:
            assert scaled.pos.options["scaling"] == "yarn"
            assert scaled.config.pos_options == dict(scaling="yarn", factor=4.0)
        with encoding_options(m, scaling="pi"):  # factor 1: the same model
            assert torch.equal(m(x).logits, plain)
    assert m.config.pos_options == {}
    with refused("one of none, pi, ntk, yarn"):
        encoding_options(m, scaling="linear").__enter__()
    assert m.pos.options["scaling"] == "none"


@pytest.mark.parametrize("preset", list(PRESETS))
def test_an_encoding_other_than_learned_adds_a_thousand_parameters_or_so_at_most(preset):
    shape = ModelConfig.from_preset(preset)
    added = [
        sum(p.numel() for p in get_encoding(name, shape.d_model, shape.n_head, shape.max_len).parameters())
        for name in ENCODINGS
        if name != "learned"
    ]
    assert max(added) < 2000  # at 32 heads


def test_frozen_runs_in_the_devices_autocast_dtype():
    net = torch.nn.Linear(2, 2).train()
    with mock.patch.dict(AUTOCAST_DTYPES, cpu=torch.bfloat16), frozen(net):  # how a GPU runs it, here on the CPU
        assert net(torch.ones(1, 2)).dtype == torch.bfloat16
