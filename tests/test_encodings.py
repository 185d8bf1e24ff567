"""Every registered encoding checked by what its maths promises, and proof that a new encoding is one class in one
place.

The properties: a causal model never sees the future (nor do the hybrids, partial RoPE and the temperature); the
encodings that are functions of m - n give position scores that depend on m - n alone; the fused and explicit
attention paths agree, gradients included; a bidirectional model is permutation-equivariant exactly when it has no
positions. Each encoding's own formulas are checked in nbs/01_encodings."""

import dataclasses
from functools import partial

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pytest
import torch

import posenc_nb.model
from posenc_nb.checkpoint import load_run
from posenc_nb.config import ConfigError, TrainConfig
from posenc_nb.encodings import ENCODINGS, ROPE_SCALINGS, PositionalEncoding, bias_matrix, get_encoding, register
from posenc_nb.evaluate import perplexity_by_length, plot_perplexity
from posenc_nb.model import ModelConfig, TransformerLM, attention_bias, encoding_options
from posenc_nb.plots import encoding_color, encoding_label, plot_runs
from posenc_nb.probe import plot_probe_layers, probe_layers, probe_windows
from posenc_nb.tokens import load_tokens
from posenc_nb.train import train
from support import SMALL as SHARED_SMALL

SMALL = dataclasses.replace(SHARED_SMALL, max_len=16)  # a short table: its limit shows within a few tokens
SCALINGS = [kind for kind in ROPE_SCALINGS if kind != "none"]
# (encoding, options): every registered encoding with its defaults, the original Transformer's sinusoidal table, RoPE
# rescaled at inference
VARIANTS = (
    [(name, {}) for name in ENCODINGS]
    + [("sinusoidal", dict(table="vaswani")), ("rope", dict(fraction=0.5))]
    + [("rope", dict(scaling=kind, factor=4.0)) for kind in SCALINGS]
)
WARM = dict(attn_scale=0.1, floor_scale=4.0)  # Llama 4's temperature, acting within a few tokens
# (encoding, options, model keys): the above, then layers without positions among RoPE layers and the temperature
MODELS = [(name, options, {}) for name, options in VARIANTS] + [
    ("nopos", WARM, {}),
    ("rope", {}, dict(nopos_layers="last")),
    ("rope", dict(fraction=0.5), dict(nopos_layers=[0], nopos_options=WARM)),
]
DISTANCE_ONLY = {"nopos", "rope", "alibi", "t5", "kerple", "xpos"}  # what the maths says; FIRE normalises by the query


def variant_id(variant):
    name, options, *keys = variant
    return "-".join([name, *map(str, options.values()), *(f"{k}={v}" for k, v in (keys or [{}])[0].items())])


def longest(name: str) -> int:
    "3x max_len, or max_len for an encoding with a length limit."
    return SMALL.max_len * (1 if ENCODINGS[name].length_limit else 3)


def make(name, options=None, causal=True, **overrides):
    torch.manual_seed(0)
    model = TransformerLM(
        dataclasses.replace(SMALL, pos_encoding=name, pos_options=options or {}, causal=causal, **overrides)
    )
    with torch.no_grad():  # learned biases start near zero: make them large enough to matter
        for p in model.pos.parameters():
            p.add_(torch.randn_like(p))
    return model.eval()


@pytest.mark.parametrize("variant", MODELS, ids=variant_id)
def test_causal_outputs_ignore_later_tokens(variant):
    "Changing token t + 1 leaves the outputs up to t unchanged, on both attention paths, beyond max_len where allowed."
    name, options, keys = variant
    model = make(name, options, **keys)
    idx = torch.randint(0, SMALL.vocab_size, (2, longest(name)))
    t = idx.shape[1] - 3
    changed = idx.clone()
    changed[:, t + 1] = (changed[:, t + 1] + 1) % SMALL.vocab_size
    with torch.no_grad():
        for attentions in (False, True):
            before = model(idx, output_attentions=attentions).logits
            after = model(changed, output_attentions=attentions).logits
            torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], atol=0, rtol=0)
            assert not torch.allclose(after[:, t + 1 :], before[:, t + 1 :])
    with torch.no_grad():  # without the causal mask, every output sees the change
        two_way = make(name, options, causal=False, **keys)
        assert not torch.allclose(two_way(idx).logits[:, : t + 1], two_way(changed).logits[:, : t + 1])


def position_scores(enc: PositionalEncoding, T: int) -> torch.Tensor:
    "The scores position alone gives one query vector and one key vector placed at every position: `(n_head, T, T)`."
    head_dim = enc.d_model // enc.n_head
    torch.manual_seed(1)
    q, k = (torch.randn(1, enc.n_head, 1, head_dim).expand(1, enc.n_head, T, head_dim) for _ in range(2))
    q, k = enc.rotate(q, k)
    scores = (q @ k.transpose(-2, -1))[0] / head_dim**0.5
    bias = bias_matrix(enc, T, causal=True)
    return scores if bias is None else scores + bias


@pytest.mark.parametrize(
    "variant", [v for v in VARIANTS if ENCODINGS[v[0]].embed is PositionalEncoding.embed], ids=variant_id
)
def test_scores_depend_on_distance_alone_where_the_maths_says(variant):
    """Encodings acting on the scores (not on the embeddings), for m >= n up to 4x max_len: constant along each diagonal
    m - n = d for the relative encodings, and only for them."""
    enc = make(*variant).pos
    with torch.no_grad():
        scores = position_scores(enc, 4 * SMALL.max_len)
    spread = max(
        (scores.diagonal(-d, dim1=-2, dim2=-1) - scores.diagonal(-d, dim1=-2, dim2=-1)[..., :1]).abs().max().item()
        for d in range(scores.shape[-1])
    )
    assert (spread < 1e-4) == (variant[0] in DISTANCE_ONLY), f"{variant}: largest change along a diagonal {spread}"


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("variant", MODELS, ids=variant_id)
def test_fused_and_explicit_paths_agree_with_gradients(variant, causal, monkeypatch):
    """Query blocks included (block=8 over 3 x max_len); the encodings' own parameters get the same gradients on both
    paths."""
    name, options, keys = variant
    model = make(name, options, causal=causal, **keys)
    idx = torch.randint(0, SMALL.vocab_size, (2, longest(name)))
    grads = []
    for attentions in (False, True):
        model.zero_grad()
        logits = model(idx, output_attentions=attentions).logits
        logits.square().mean().backward()
        grads.append((logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (fused, fused_grads), (explicit, explicit_grads) = grads
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    assert fused_grads.keys() == explicit_grads.keys() == {n for n, _ in model.named_parameters()}
    for name in fused_grads:
        torch.testing.assert_close(fused_grads[name], explicit_grads[name], atol=1e-5, rtol=1e-4, msg=name)
    monkeypatch.setattr(posenc_nb.model, "fused_attention", partial(posenc_nb.model.fused_attention, block=8))
    with torch.no_grad():  # the same in query blocks of 8
        torch.testing.assert_close(model(idx).logits, fused, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["t5", "kerple"])  # the distance rows with parameters
def test_distance_row_gradient_matches_the_full_matrix(name):
    "The strided view of a distance row passes the same gradient to the encoding as the matrix it stands for."
    enc = make(name).pos
    T, weights = 20, torch.randn(SMALL.n_head, 20, 20)
    grads = []
    for build in (
        lambda: attention_bias(enc, T, False, torch.float32, "cpu").block(0, T, slice(None))[0].flip(-2),
        lambda: bias_matrix(enc, T),
    ):
        enc.zero_grad()
        (build() * weights).sum().backward()
        grads.append([p.grad.clone() for p in enc.parameters()])
    for strided, full in zip(*grads):
        torch.testing.assert_close(strided, full)


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_bidirectional_model_is_permutation_equivariant_only_without_positions(variant):
    model = make(*variant, causal=False)
    x, perm = torch.randint(0, SMALL.vocab_size, (2, SMALL.max_len)), torch.randperm(SMALL.max_len)
    with torch.no_grad():
        change = (model(x[:, perm]).logits - model(x).logits[:, perm]).abs().max().item()
    assert (change < 1e-5) == (variant[0] == "nopos"), f"{variant}: {change}"


def test_rope_scaling_at_evaluation_time():
    "A RoPE model's rotations swapped for a block: the same weights, other logits beyond factor 1, restored afterwards."
    model = make("rope")
    idx = torch.randint(0, SMALL.vocab_size, (1, 4 * SMALL.max_len))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        plain = model(idx).logits
        for kind in SCALINGS:
            with encoding_options(model, scaling=kind, factor=4.0):
                assert not torch.allclose(model(idx).logits, plain), kind
            with encoding_options(model, scaling=kind, factor=1.0):
                torch.testing.assert_close(model(idx).logits, plain, atol=1e-6, rtol=0)
        torch.testing.assert_close(model(idx).logits, plain, atol=0, rtol=0)
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())


def test_kerple_keeps_learning_at_its_floor():
    "r1 and r2 pushed to their floor stay above it and still get a gradient, so a step can raise them again."
    enc = make("kerple").pos
    with torch.no_grad():
        enc.unbounded.fill_(-30.0)
    torch.testing.assert_close(enc.rates, torch.full_like(enc.rates, enc.floor))
    enc.distance_bias(20, True, "cpu").sum().backward()
    assert (enc.unbounded.grad != 0).all()


def test_fire_at_a_zero_threshold_gives_finite_logits():
    model = make("fire", dict(threshold=0.0))
    with torch.no_grad():
        for attentions in (False, True):
            assert (
                model(torch.randint(0, SMALL.vocab_size, (2, 20)), output_attentions=attentions).logits.isfinite().all()
            )


@pytest.mark.parametrize("threshold", [-0.25, float("inf"), float("nan")])
def test_fire_refuses_a_threshold_that_is_no_share_of_max_len(threshold):
    with pytest.raises(ValueError, match="'threshold' is the initial L as a share of max_len"):
        ModelConfig(pos_encoding="fire", pos_options={"threshold": threshold})


def test_sinusoidal_tables_are_options_with_fairseqs_the_default():
    assert ModelConfig(pos_encoding="sinusoidal").pos_options == {}
    fairseq, vaswani = (make("sinusoidal", options).pos.table for options in ({}, dict(table="vaswani")))
    assert fairseq.shape == vaswani.shape and not torch.allclose(fairseq, vaswani)
    torch.testing.assert_close(get_encoding("sinusoidal", 32, 4, 16, table="fairseq").table, fairseq, atol=0, rtol=0)
    with pytest.raises(ValueError, match="'table' must be one of fairseq, vaswani, got 'bert'"):
        ModelConfig(pos_encoding="sinusoidal", pos_options={"table": "bert"})


# --- options and registration ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(ENCODINGS))
def test_unknown_option_names_the_known_ones(name):
    with pytest.raises(ValueError) as error:
        ModelConfig(pos_encoding=name, pos_options={"colour": 1.0})
    message = str(error.value)
    assert "'colour'" in message and all(option in message for option in ENCODINGS[name].options), message


def test_option_of_the_wrong_type():
    with pytest.raises(ValueError) as error:
        get_encoding("t5", 32, 4, 16, buckets="32")
    assert "'buckets'" in str(error.value) and "int" in str(error.value) and "'32'" in str(error.value)
    assert get_encoding("rope", 32, 4, 16, base=500).options["base"] == 500.0  # an int where a float is due


def test_training_config_reports_a_bad_option_under_its_key():
    with pytest.raises(ConfigError) as error:
        TrainConfig.from_preset("smoke", pos_encoding="rope", pos_options={"bse": 10.0})
    assert "'bse'" in str(error.value) and "base" in str(error.value)


def test_registration_needs_a_label_and_a_colour_of_its_own():
    class Anonymous(PositionalEncoding):
        "No label, no colour."

    with pytest.raises(TypeError, match="label and color"):
        register("anonymous")(Anonymous)
    Anonymous.label, Anonymous.color = "Anonymous", ENCODINGS["rope"].color
    with pytest.raises(ValueError, match="'rope'"):
        register("anonymous")(Anonymous)
    assert "anonymous" not in ENCODINGS


# --- a new encoding is one class in one place
# ---------------------------------------------------------------------------
class Stripes(PositionalEncoding):
    "A toy: a learned vector added at every `period`-th position, and a learned per-head bias on keys `period` apart."

    label, color = "Stripes (toy)", "#17becf"
    options = dict(period=4)

    def __init__(self, d_model, n_head, max_len, **options):
        super().__init__(d_model, n_head, max_len, **options)
        self.mark = torch.nn.Parameter(torch.zeros(d_model))
        self.beat = torch.nn.Parameter(torch.zeros(n_head))

    def embed(self, x):
        on = torch.arange(x.shape[1], device=x.device) % self.options["period"] == 0
        return x + on[:, None] * self.mark

    def distance_bias(self, T, causal, device):
        on_beat = torch.arange(1 - T, T, device=device) % self.options["period"] == 0
        return self.beat[:, None] * on_beat


@pytest.fixture
def stripes(tmp_path, monkeypatch):
    "The toy registered for this test alone, with runs written under `tmp_path`."
    monkeypatch.setenv("POSENC_RUNS_DIR", str(tmp_path / "runs"))
    register("stripes")(Stripes)
    yield "stripes"
    del ENCODINGS["stripes"]


def test_a_new_encoding_runs_through_training_evaluation_probe_and_plots(stripes):
    cfg = TrainConfig.from_preset(
        "smoke", pos_encoding=stripes, pos_options={"period": 3}, max_steps=6, eval_interval=3
    )
    run = train(cfg, progress=False)
    assert run.finished and run.model.pos.options == {"period": 3}
    assert run.model.pos.mark.abs().sum() > 0 and run.model.pos.beat.abs().sum() > 0  # both hooks learned

    val = load_tokens(cfg.corpus, "validation", vocab_size=cfg.vocab_size, progress=False)
    ppl = perplexity_by_length(run.model, val, [16, 64, 256], max_tokens=1024)
    assert ppl.perplexity.notna().all() and set(ppl.encoding) == {stripes}  # no length limit declared: any length
    probe = probe_layers(
        run.model,
        probe_windows(run.model, val, val, seq_len=32, n_train=8, n_select=8, n_eval=4),
        kinds="mlp",
        epochs=1,
    )
    assert list(probe.layer) == list(range(cfg.model_config().n_layer + 1))

    figures = [plot_perplexity(ppl, train_context=cfg.seq_len), plot_probe_layers(probe), plot_runs([run])[0]]
    labels = {line.get_label() for fig in figures for ax in fig.axes for line in ax.get_lines()}
    colors = {line.get_color() for fig in figures for ax in fig.axes for line in ax.get_lines()}
    assert encoding_label(stripes) in labels and encoding_color(stripes) in colors

    reloaded = load_run(run.out_dir)  # the checkpoint rebuilds the toy with its options and weights
    idx = torch.as_tensor(val[:40].astype(np.int64))[None]
    with torch.no_grad():
        torch.testing.assert_close(reloaded.model(idx).logits, run.model(idx).logits)
