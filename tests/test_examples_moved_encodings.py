"""The checks nbs/01_encodings' examples moved out (issue 58, item 5): the chapter shows one thing a cell; the
refusals of bad input and the properties beside its point are checked here, on the library."""

import math

import pytest
import torch

from posenc_nb.encodings import (
    RoPE,
    alibi_slopes,
    bias_matrix,
    encoding_problem,
    get_encoding,
    nopos_layer_problem,
    query_temperature,
    sinusoidal_table,
)
from support import refused


def test_nopos_adds_no_bias():
    nopos = get_encoding("nopos", d_model=8, n_head=2, max_len=4)
    assert nopos.distance_bias(10, True, "cpu") is None
    assert nopos.attn_bias(range(10), range(10), True, "cpu") is None
    assert bias_matrix(nopos, 10) is None


def test_an_unknown_encoding_is_refused_naming_the_known_ones():
    with refused("positional encoding must be one of nopos"):
        get_encoding("relative", 8, 2, 4)
    assert encoding_problem("nopos") is None
    assert encoding_problem("nopo").startswith("must be one of nopos, ")


def test_nopos_names_its_options_when_given_another():
    with refused("nopos has no option 'base'; its options are: attn_scale, floor_scale"):
        get_encoding("nopos", 8, 2, 4, base=10.0)


def test_the_temperature_is_1_before_its_first_step():
    assert torch.equal(query_temperature(3, 0.1, 4), torch.ones(3))


@pytest.mark.parametrize("floor_scale", [0, math.inf])  # inf would be written into meta.json as bare Infinity
def test_the_temperature_needs_a_finite_positive_floor_scale(floor_scale):
    with refused("'floor_scale' (finite, > 0, in positions)"):
        get_encoding("nopos", 8, 2, 4, floor_scale=floor_scale)


def test_learned_positions_are_a_row_a_position_drawn_as_fairseq_draws_them():
    learned = get_encoding("learned", d_model=64, n_head=2, max_len=16)
    assert sum(p.numel() for p in learned.parameters()) == 16 * 64
    assert abs(learned.table.weight.std().item() - 64**-0.5) < 0.01  # N(0, 1/d_model)


def test_the_vaswani_table_interleaves_sin_and_cos_and_drops_the_last_cos_of_an_odd_width():
    tab = sinusoidal_table(50, 6, table="vaswani")
    expected = torch.tensor([math.sin(7 / 10000 ** (4 / 6)), math.cos(7 / 10000 ** (4 / 6))])
    torch.testing.assert_close(tab[7, 4:], expected)
    assert sinusoidal_table(3, 5, table="vaswani").shape == (3, 5)


@pytest.mark.parametrize(
    "args, message",
    [
        ((4, 0), "dim > 0"),
        ((4, 2), "needs dim >= 4"),
        ((4, 8, "bert"), "sinusoidal table must be one of fairseq, vaswani, got 'bert'"),
    ],
)
def test_sinusoidal_table_refuses(args, message):
    with refused(message):
        sinusoidal_table(*args)


def test_sinusoidal_positions_are_added_as_they_are_and_learn_nothing():
    sin_enc = get_encoding("sinusoidal", d_model=8, n_head=2, max_len=4)
    torch.testing.assert_close(sin_enc.embed(torch.ones(1, 2, 8))[0], 1 + sinusoidal_table(2, 8))  # the model scales
    assert sum(p.numel() for p in sin_enc.parameters()) == 0


def test_the_vaswani_option_reaches_beyond_max_len_and_a_bad_table_is_refused():
    vaswani = get_encoding("sinusoidal", 8, 2, 4, table="vaswani")
    assert torch.equal(vaswani.embed(torch.zeros(1, 9, 8))[0], sinusoidal_table(9, 8, "vaswani"))
    with refused("'table' must be one of fairseq, vaswani, got 'bert'"):
        get_encoding("sinusoidal", 8, 2, 4, table="bert")


def test_rope_needs_an_even_head_dim():
    with refused("must be even"):
        get_encoding("rope", d_model=12, n_head=4, max_len=8)


def test_rope_takes_an_int_base_and_names_a_mistyped_option():
    torch.testing.assert_close(get_encoding("rope", 16, 2, 8, base=100).inv_freq, 100 ** -(torch.arange(0, 8, 2) / 8))
    with refused("(did you mean 'base'?); its options are: base, scaling, factor, fraction"):
        get_encoding("rope", 16, 2, 8, bass=100.0)
    with refused("'base' must be of type float"):
        get_encoding("rope", 16, 2, 8, base="1e4")


def test_alibi_has_a_slope_a_head_for_any_positive_head_count():
    assert len(alibi_slopes(6)) == 6
    with refused("alibi_slopes' n_heads must be a positive integer, got 0"):
        alibi_slopes(0)


def test_alibis_bias_is_a_float32_row_of_2t_minus_1_distances_a_head():
    alibi = get_encoding("alibi", d_model=16, n_head=8, max_len=4)
    row = alibi.distance_bias(6, causal=True, device="cpu")
    assert (row.shape, row.dtype) == ((8, 11), torch.float32)
    assert bias_matrix(alibi, 6).shape == (8, 6, 6)


def test_partial_rope_of_the_whole_head_is_rope_bit_for_bit():
    full = get_encoding("rope", d_model=64, n_head=2, max_len=16, fraction=1.0)
    assert torch.equal(full.rotations, get_encoding("rope", d_model=64, n_head=2, max_len=16).rotations)


def test_partial_rope_refuses_a_fraction_that_is_no_whole_number_of_pairs_or_none():
    with refused("use a multiple of 0.0625"):
        get_encoding("rope", 64, 2, 16, fraction=0.3)
    with refused("in (0, 1], got 0.0"):
        RoPE.check_options(dict(fraction=0.0))


@pytest.mark.parametrize(
    "spec, message",
    [
        ("every-5", "a whole k from 2 to n_layer=4"),
        ("every", "a whole k"),
        ("last-2", "'last' none"),
        ("first", "must be one of every, last, got 'first'"),
        ([4], "distinct layers in [0, n_layer=4)"),
        ([1, 1], "distinct layers"),
        ([], "distinct layers"),
        ([0, 1, 2, 3], "use pos_encoding='nopos'"),
    ],
)
def test_a_pattern_that_does_not_fit_four_layers_is_refused(spec, message):
    assert message in nopos_layer_problem(spec, 4)


@pytest.mark.parametrize("spec", ["every-2", "last", [0]])
def test_one_layer_has_no_hybrid_and_no_pattern_to_offer(spec):
    assert "give n_layer of at least 2, or pos_encoding='nopos'" in nopos_layer_problem(spec, 1)


def test_layers_without_positions_need_an_encoding_that_acts_in_attention():
    assert nopos_layer_problem("last", 4, "learned") == (
        "takes positions off some layers' attention, where learned puts none; use an encoding that acts there, e.g. "
        "rope"
    )
