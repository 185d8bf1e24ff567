"""The checks nbs/01a_later_encodings' examples moved out (issue 58, item 5): the chapter shows what each encoding
does, once; the rest of T5's buckets, KERPLE's and FIRE's ranges, the scalings' refusals, YaRN's pairs worked by
hand, and every encoding at 8x its `max_len` are checked here, on the library."""

import math

import pytest
import torch

from posenc_nb.encodings import ENCODINGS, RoPE, bias_matrix, get_encoding, rope_frequencies
from posenc_nb.later_encodings import t5_bucket, yarn
from support import refused


def test_t5_buckets_keys_after_the_query_in_bucket_0_and_the_rest_log_spaced_and_in_order():
    d = torch.arange(-200, 201)
    causal_buckets, two_way = t5_bucket(d, causal=True), t5_bucket(d, causal=False)
    assert causal_buckets[:200].unique().tolist() == [0]  # keys after the query: never seen
    expected = [min(31, 16 + int(math.log(d / 16) / math.log(128 / 16) * 16)) for d in range(16, 201)]
    assert causal_buckets[200 + 16 :].tolist() == expected
    assert (causal_buckets[200:].diff() >= 0).all()
    assert (two_way.min(), two_way.max()) == (0, 31)


def test_t5s_row_and_table():
    t5 = get_encoding("t5", d_model=16, n_head=4, max_len=8)
    assert t5.distance_bias(40, causal=True, device="cpu").shape == (4, 79)
    assert sum(p.numel() for p in t5.parameters()) == 32 * 4
    with refused("'buckets' must be of type int"):
        get_encoding("t5", 16, 4, 8, buckets=32.0)


def test_kerples_rates_start_in_their_ranges_and_distance_0_has_no_bias():
    torch.manual_seed(0)
    kerple = get_encoding("kerple", d_model=16, n_head=4, max_len=8)
    r1, r2 = kerple.rates.detach()
    assert (r1 > 0.01).all() and (r1 < 2.01).all() and (r2 > 0.01).all() and (r2 < 1.01).all()
    with torch.no_grad():
        assert torch.equal(kerple.distance_bias(30, causal=True, device="cpu")[:, 29], torch.zeros(4))


@pytest.fixture
def fire():
    torch.manual_seed(0)
    return get_encoding("fire", d_model=16, n_head=4, max_len=32)  # threshold L = 8


def test_fires_input_is_0_at_distance_0_and_1_at_the_farthest_key_past_the_threshold(fire):
    x = fire.normalised_distance(range(64), range(64)).detach()
    assert torch.equal(x.diagonal(), torch.zeros(64))
    torch.testing.assert_close(x[63, 0], torch.tensor(1.0))


def test_fires_bias_in_blocks_is_the_whole_bias_cut(fire):
    bias = fire.attn_bias(range(64), range(64), True, "cpu").detach()
    assert bias.shape == (4, 64, 64)
    block = fire.attn_bias(range(40, 50), range(20, 64), True, "cpu").detach()
    torch.testing.assert_close(block, bias[:, 40:50, 20:], atol=1e-6, rtol=0)
    assert torch.equal(bias_matrix(fire, 64).detach(), bias)


def test_fire_at_a_zero_threshold_keeps_query_0_finite():
    at_zero = get_encoding("fire", d_model=16, n_head=4, max_len=32, threshold=0.0)
    assert at_zero.attn_bias(range(8), range(8), True, "cpu").isfinite().all()


@pytest.mark.parametrize("bad", [-0.5, math.inf, math.nan])
def test_fire_refuses_a_threshold_that_is_no_share(bad):
    with refused("'threshold' is the initial L"):
        get_encoding("fire", 16, 4, 32, threshold=bad)


def test_xpos_keeps_ropes_options():
    assert get_encoding("xpos", d_model=16, n_head=2, max_len=8).options["base"] == 10000.0


@pytest.mark.parametrize("kind", ["pi", "ntk", "yarn"])
def test_a_scaling_of_factor_1_is_plain_rope(kind):
    plain = get_encoding("rope", d_model=32, n_head=1, max_len=128)
    scaled = get_encoding("rope", d_model=32, n_head=1, max_len=128, scaling=kind)
    torch.testing.assert_close(scaled.rotations, plain.rotations)


def test_an_unknown_scaling_or_a_factor_below_1_is_refused():
    with refused("one of none, pi, ntk, yarn, got 'linear'"):
        RoPE.check_options(dict(scaling="linear"))
    with refused("at least 1, got 0.5"):
        RoPE.check_options(dict(factor=0.5))


@pytest.mark.parametrize(
    "head_dim, max_len, factor, kept_pairs, ratios, attention",
    [  # worked by hand in the chapter, from the formula
        (32, 128, 8.0, 1, {0: 1.0, 1: 1 / 8 / 6 + 5 / 6, 5: 1 / 8 * 5 / 6 + 1 / 6, 6: 1 / 8, 15: 1 / 8}, 1.2079442),
        (128, 4096, 16.0, 21, {20: 1.0, 21: 1 / 16 / 26 + 25 / 26, 33: 0.53125, 46: 1 / 16}, 1.2772589),
    ],
)
def test_yarns_pairs_as_worked_by_hand(head_dim, max_len, factor, kept_pairs, ratios, attention):
    inv_freq, magnitude = yarn(head_dim, 10000.0, max_len, factor)
    plain = rope_frequencies(head_dim, 10000.0)
    kept = inv_freq == plain
    assert (int(kept.sum()), bool(kept[:kept_pairs].all())) == (kept_pairs, True)
    for pair, ratio in ratios.items():
        assert (inv_freq[pair] / plain[pair]).item() == pytest.approx(ratio, abs=1e-6)
    assert magnitude == pytest.approx(attention, abs=1e-6)


@pytest.mark.parametrize("name", [name for name, cls in ENCODINGS.items() if not cls.length_limit])
def test_every_encoding_without_a_limit_runs_at_8x_max_len_and_keeps_its_buffers(name):
    max_len, long = 16, 128
    enc = get_encoding(name, d_model=16, n_head=4, max_len=max_len)
    buffers = dict(enc.named_buffers())
    x, q = torch.randn(2, long, 16), torch.randn(2, 4, long, 4)
    assert enc.embed(x).shape == x.shape
    assert enc.rotate(q, q)[0].shape == q.shape
    row, block = enc.distance_bias(long, True, "cpu"), enc.attn_bias(range(32, 48), range(long), True, "cpu")
    for bias, shape in ((row, (4, 2 * long - 1)), (block, (4, 16, long))):
        assert bias is None or (bias.shape, bias.dtype) == (shape, torch.float32), shape
    after = dict(enc.named_buffers())
    assert after.keys() == buffers.keys() and all(after[n] is b for n, b in buffers.items())  # none replaced


def test_learned_positions_refuse_8x_max_len():
    with refused("max_len=16"):
        get_encoding("learned", d_model=16, n_head=4, max_len=16).embed(torch.randn(2, 128, 16))
