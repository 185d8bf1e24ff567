"""Bad input to the analysis modules (evaluate, probe, attention, plots): each gets a clear error, or an explained NaN."""

import math

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest
import torch

from posenc_nb.attention import attention_maps, permutation_gap, plot_attention_grid, shuffle_words
from posenc_nb.data import train_tokenizer
from posenc_nb.evaluate import loss_by_position, masked_perplexity, perplexity_by_length, word_order_losses
from posenc_nb.model import ModelConfig, TransformerLM
from posenc_nb.plots import caption, encoding_color, plot_by_encoding, savefig, style_axes, new_figure
from posenc_nb.probe import probe_layers, probe_predictions

MAX_LEN = 16
SENTENCE = "The cat sat on the mat"


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(["The cat sat on the mat. The dog sat on the log."] * 20, 300)


def tiny(pos_encoding="nopos", causal=True, vocab_size=300):
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=vocab_size, n_layer=2, n_head=2, d_model=32, max_len=MAX_LEN,
                         pos_encoding=pos_encoding, causal=causal)
    return TransformerLM(config).eval()


@pytest.fixture(scope="module")
def tokens():
    return np.random.default_rng(0).integers(3, 300, 4_000).astype(np.uint16)


@pytest.fixture(scope="module")
def models(tokenizer):
    vocab = tokenizer.get_vocab_size()
    return {"nopos": tiny(vocab_size=vocab), "learned": tiny("learned", vocab_size=vocab),
            "mlm": tiny(causal=False, vocab_size=vocab)}


def small_tokens(tokens, vocab):
    return tokens % vocab


# --- tokens that do not fit the model ------------------------------------------------------------------------------
CAUSAL_ENTRY_POINTS = {
    "perplexity_by_length": lambda m, t: perplexity_by_length(m, t, [8]),
    "loss_by_position": lambda m, t: loss_by_position(m, t, 8),
    "word_order_losses": lambda m, t: word_order_losses(m, t, 8, n_samples=4),
    "probe_layers": lambda m, t: probe_layers(m, t, t, seq_len=8, n_train=4, n_eval=2, steps=2),
    "probe_predictions": lambda m, t: probe_predictions(m, t, t, layer=1, seq_len=8, n_train=4, n_eval=2, steps=2),
}


@pytest.mark.parametrize("name", CAUSAL_ENTRY_POINTS)
def test_token_ids_beyond_the_vocabulary(name, models, tokens):
    model = models["nopos"]
    bad = np.concatenate([small_tokens(tokens, model.config.vocab_size), [model.config.vocab_size + 5]])
    with pytest.raises(ValueError, match=r"outside the model's vocabulary \(vocab_size=\d+\).*different tokenizer"):
        CAUSAL_ENTRY_POINTS[name](model, bad)


@pytest.mark.parametrize("name", CAUSAL_ENTRY_POINTS)
def test_empty_split(name, models):
    with pytest.raises(ValueError, match="is empty: check the split name"):
        CAUSAL_ENTRY_POINTS[name](models["nopos"], np.zeros(0, dtype=np.uint16))


def test_empty_split_masked(models):
    with pytest.raises(ValueError, match="is empty"):
        masked_perplexity(models["mlm"], np.zeros(0, dtype=np.uint16), 8)


def test_tokens_not_1d(models, tokens):
    with pytest.raises(ValueError, match="1-D array"):
        perplexity_by_length(models["nopos"], tokens[:100].reshape(10, 10), [8])


# --- tokenizer and model that do not match ---------------------------------------------------------------------------
def test_tokenizer_of_another_vocabulary(tokenizer):
    model = tiny(vocab_size=tokenizer.get_vocab_size() + 7)
    with pytest.raises(ValueError, match=r"the tokenizer has \d+ tokens but the model's vocab_size is \d+"):
        attention_maps(model, tokenizer, SENTENCE, layer=1, head=0)
    with pytest.raises(ValueError, match="vocab_size"):
        plot_attention_grid(model, tokenizer, SENTENCE)


# --- contexts longer than learned positions allow --------------------------------------------------------------------
def test_learned_beyond_max_len_is_nan_with_reason_in_perplexity(models, tokens):
    model = models["learned"]
    df = perplexity_by_length(model, small_tokens(tokens, model.config.vocab_size), [MAX_LEN, 2 * MAX_LEN], protocol="both")
    assert list(df.columns) == ["encoding", "context_length", "protocol", "stride", "perplexity", "tokens_scored", "note"]
    fits, too_long = df[df.context_length == MAX_LEN], df[df.context_length == 2 * MAX_LEN]
    assert fits.perplexity.notna().all() and (fits.note == "").all()
    assert too_long.perplexity.isna().all() and (too_long.tokens_scored == 0).all()
    assert too_long.note.str.contains(f"max_len={MAX_LEN}").all()


@pytest.mark.parametrize("call", [
    lambda m, t, tok: loss_by_position(m, t, 2 * MAX_LEN),
    lambda m, t, tok: word_order_losses(m, t, 2 * MAX_LEN),
    lambda m, t, tok: probe_layers(m, t, t, seq_len=2 * MAX_LEN),
    lambda m, t, tok: probe_predictions(m, t, t, layer=0, seq_len=2 * MAX_LEN),
    lambda m, t, tok: attention_maps(m, tok, " ".join(["cat"] * 2 * MAX_LEN), layer=1, head=0),
], ids=["loss_by_position", "word_order", "probe_layers", "probe_predictions", "attention_maps"])
def test_learned_beyond_max_len_is_an_error_elsewhere(call, models, tokens, tokenizer):
    model = models["learned"]
    with pytest.raises(ValueError, match=f"exceeds the learned position table \\(max_len={MAX_LEN}\\).*at most {MAX_LEN}"):
        call(model, small_tokens(tokens, model.config.vocab_size), tokenizer)


def test_too_few_tokens_for_the_context(models, tokens):
    model = models["nopos"]
    few = small_tokens(tokens[:10], model.config.vocab_size)
    df = perplexity_by_length(model, few, [4, 64])
    assert df.perplexity.notna()[0] and math.isnan(df.perplexity[1]) and "does not fit" in df.note[1]
    with pytest.raises(ValueError, match="no full 64-token window"):
        loss_by_position(model, few, 64)
    with pytest.raises(ValueError, match="do not fill one 64-token"):
        probe_layers(model, few, few, seq_len=64)


# --- layers and heads that do not exist ------------------------------------------------------------------------------
@pytest.mark.parametrize("layer", [-1, 3, 2.0, "1"])
def test_probe_layer_that_does_not_exist(layer, models, tokens):
    model = models["nopos"]
    t = small_tokens(tokens, model.config.vocab_size)
    with pytest.raises(ValueError, match=r"does not exist: this model has hidden states 0..2"):
        probe_layers(model, t, t, seq_len=8, layers=[layer], n_train=4, n_eval=2, steps=2)
    with pytest.raises(ValueError, match=r"does not exist"):
        probe_predictions(model, t, t, layer=layer, seq_len=8, n_train=4, n_eval=2, steps=2)


@pytest.mark.parametrize("layer", [0, 3])
def test_attention_layer_that_does_not_exist(layer, models, tokenizer):
    with pytest.raises(ValueError, match=r"has no attention: this model's attention layers are 1..2"):
        attention_maps(models["nopos"], tokenizer, SENTENCE, layer=layer, head=0)
    with pytest.raises(ValueError, match="has no attention"):
        plot_attention_grid(models["nopos"], tokenizer, SENTENCE, layers=[layer])


@pytest.mark.parametrize("head", [-1, 2])
def test_head_that_does_not_exist(head, models, tokenizer):
    with pytest.raises(ValueError, match=r"head -?\d does not exist: this model's heads are 0..1"):
        attention_maps(models["nopos"], tokenizer, SENTENCE, layer=1, head=head)


# --- arguments out of range ----------------------------------------------------------------------------------------------
def test_bad_arguments(models, tokens, tokenizer):
    model = models["nopos"]
    t = small_tokens(tokens, model.config.vocab_size)
    with pytest.raises(ValueError, match="unknown protocol"):
        perplexity_by_length(model, t, [8], protocol="strided")
    with pytest.raises(ValueError, match="positive integer"):
        perplexity_by_length(model, t, [0])
    with pytest.raises(ValueError, match="stride must be a positive integer"):
        perplexity_by_length(model, t, [8], protocol="sliding", stride=0)
    with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
        perplexity_by_length(model, t, [8], max_tokens=-5)
    with pytest.raises(ValueError, match="more than the 8 positions"):
        loss_by_position(model, t, 8, n_buckets=9)
    with pytest.raises(ValueError, match="unknown probe kind"):
        probe_layers(model, t, t, kind="deep")
    with pytest.raises(ValueError, match="not a permutation"):
        shuffle_words(SENTENCE, [0, 1, 2])
    with pytest.raises(ValueError, match="not a permutation"):
        permutation_gap(model, tokenizer, SENTENCE, [0, 1, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="mask_prob"):
        masked_perplexity(models["mlm"], t, 8, mask_prob=1.5)


def test_objective_mismatch(models, tokens):
    t = small_tokens(tokens, models["mlm"].config.vocab_size)
    with pytest.raises(ValueError, match="bidirectional.*use masked_perplexity"):
        perplexity_by_length(models["mlm"], t, [8])
    with pytest.raises(ValueError, match="needs a causal model"):
        word_order_losses(models["mlm"], t, 8)
    with pytest.raises(ValueError, match="causal.*use perplexity_by_length"):
        masked_perplexity(models["nopos"], t, 8)


# --- the inputs are not harmed ---------------------------------------------------------------------------------------
def test_memmap_tokens_and_training_mode_survive(models, tokens, tmp_path):
    model = models["nopos"]
    path = tmp_path / "validation.npy"
    np.save(path, small_tokens(tokens, model.config.vocab_size))
    memmap = np.load(path, mmap_mode="r")
    model.train()
    try:
        df = perplexity_by_length(model, memmap, [8], max_tokens=64)
        assert model.training, "evaluation must restore the model's training mode"
    finally:
        model.eval()
    assert df.tokens_scored[0] == 64
    assert np.array_equal(np.load(path), memmap)


# --- plots ------------------------------------------------------------------------------------------------------------
def test_plot_errors(tmp_path):
    fig, ax = new_figure()
    with pytest.raises(ValueError, match="expected one of nopos"):
        encoding_color("NoPos")
    with pytest.raises(ValueError, match="every axis needs a label"):
        style_axes(ax, "layer", "")
    with pytest.raises(ValueError, match="empty"):
        plot_by_encoding(ax, pd.DataFrame(columns=["encoding", "layer", "mad"]), "layer", "mad")
    with pytest.raises(ValueError, match="at least one seed"):
        caption("cpu", "shakespeare", 1000, [])
    with pytest.raises(ValueError, match=r"not '\.jpg'"):
        savefig(fig, tmp_path / "figure.jpg")
    assert not list(tmp_path.iterdir()), "a refused savefig writes nothing"
