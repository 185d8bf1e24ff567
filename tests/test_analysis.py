"""Bad input to the analysis modules (evaluate, order, probe, attention, plots; their input guards in
posenc_nb.guards): each gets a ValueError carrying the facts at fault.

Errors are checked by type and by the facts their message must carry (the offending value, the argument, the limit),
not by their wording. What a chapter's examples already check (nbs/04a_evaluate .. nbs/04e_attention, nbs/04_plots) is
not repeated here: this file sweeps every entry point with the same bad input, and covers what the chapters do not.
"""

import re

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest
import torch

from posenc_nb.attention import attention_maps, permutation_gap, plot_attention_grid, shuffle_words
from posenc_nb.encodings import ENCODINGS, PositionalEncoding
from posenc_nb.tokens import train_tokenizer
from posenc_nb.evaluate import context_use, perplexity_by_length
from posenc_nb.order import loss_by_position, masked_perplexity, word_order_losses
from posenc_nb.model import ModelConfig, TransformerLM
from posenc_nb.plots import plot_by_encoding, savefig, new_figure
from posenc_nb.probe import ProbeWindows, probe_layers, probe_predictions, probe_windows

MAX_LEN = 16
SENTENCE = "The cat sat on the mat"


def error_message(call, exc=ValueError) -> str:
    "The message of the `exc` that `call()` raises (the test fails if it raises nothing, or another type)."
    with pytest.raises(exc) as error:
        call()
    return str(error.value)


def number_in(n, message: str) -> bool:
    "Whether the number `n` appears in `message` as a whole number (16 is not found in 160)."
    return re.search(rf"(?<![\d.]){re.escape(str(n))}(?![\d])", message) is not None


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(["The cat sat on the mat. The dog sat on the log."] * 20, 300)


def tiny(pos_encoding="nopos", causal=True, vocab_size=300):
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=vocab_size,
        n_layer=2,
        n_head=2,
        d_model=32,
        max_len=MAX_LEN,
        pos_encoding=pos_encoding,
        causal=causal,
    )
    return TransformerLM(config).eval()


@pytest.fixture(scope="module")
def tokens():
    return np.random.default_rng(0).integers(3, 300, 4_000).astype(np.uint16)


@pytest.fixture(scope="module")
def models(tokenizer):
    vocab = tokenizer.get_vocab_size()
    return {
        "nopos": tiny(vocab_size=vocab),
        "learned": tiny("learned", vocab_size=vocab),
        "mlm": tiny(causal=False, vocab_size=vocab),
    }


def small_tokens(tokens, vocab):
    return tokens % vocab


# --- tokens that do not fit the model: every causal entry point checks them -----------------------------------------
CAUSAL_ENTRY_POINTS = {
    "perplexity_by_length": lambda m, t: perplexity_by_length(m, t, [8]),
    "context_use": lambda m, t: context_use(m, t, short=4, long=8, stride=2),
    "loss_by_position": lambda m, t: loss_by_position(m, t, 8, n_buckets=4),
    "word_order_losses": lambda m, t: word_order_losses(m, t, 8, n_samples=4),
    "probe_windows": lambda m, t: probe_windows(m, t, t, seq_len=8, n_train=4, n_select=2, n_eval=2),
}


@pytest.mark.parametrize("name", CAUSAL_ENTRY_POINTS)
def test_token_ids_beyond_the_vocabulary(name, models, tokens):
    model = models["nopos"]
    vocab = model.config.vocab_size
    bad = np.concatenate([small_tokens(tokens, vocab), [vocab + 5]])
    message = error_message(lambda: CAUSAL_ENTRY_POINTS[name](model, bad))
    assert f"vocab_size={vocab}" in message and number_in(vocab + 5, message), message  # the limit and the offending id


@pytest.mark.parametrize("name", CAUSAL_ENTRY_POINTS)
def test_empty_split(name, models):
    with pytest.raises(ValueError, match="empty"):
        CAUSAL_ENTRY_POINTS[name](models["nopos"], np.zeros(0, dtype=np.uint16))


def test_empty_split_masked(models):
    with pytest.raises(ValueError, match="empty"):
        masked_perplexity(models["mlm"], np.zeros(0, dtype=np.uint16), 8)


def test_the_attention_direction_each_analysis_needs(models, tokens):
    "A masked LM is refused by every next-token analysis and a causal LM by the masked one; each says which it needs."
    t = small_tokens(tokens, models["nopos"].config.vocab_size)
    for call in (
        lambda: perplexity_by_length(models["mlm"], t, [8]),
        lambda: loss_by_position(models["mlm"], t, 8, n_buckets=4),
        lambda: word_order_losses(models["mlm"], t, 8, n_samples=4),
        lambda: context_use(models["mlm"], t, short=4, long=8, stride=2),
    ):
        assert "causal=True" in error_message(call)
    assert "causal=False" in error_message(lambda: masked_perplexity(models["nopos"], t, 8))


def test_tokens_not_1d(models, tokens):
    message = error_message(lambda: perplexity_by_length(models["nopos"], tokens[:100].reshape(10, 10), [8]))
    assert "(10, 10)" in message, message  # the offending shape


# --- tokenizer and model that do not match ---------------------------------------------------------------------------
def test_tokenizer_of_another_vocabulary(tokenizer):
    size = tokenizer.get_vocab_size()
    model = tiny(vocab_size=size + 7)
    for call in (
        lambda: attention_maps(model, tokenizer, SENTENCE, layer=1, head=0),
        lambda: plot_attention_grid(model, tokenizer, SENTENCE),
    ):
        message = error_message(call)
        assert number_in(size, message) and number_in(size + 7, message) and "vocab_size" in message, message


# --- contexts longer than learned positions allow --------------------------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda m, t, tok: loss_by_position(m, t, 2 * MAX_LEN),
        lambda m, t, tok: word_order_losses(m, t, 2 * MAX_LEN),
        lambda m, t, tok: context_use(m, t, short=8, long=2 * MAX_LEN, stride=4),
        lambda m, t, tok: probe_windows(m, t, t, seq_len=2 * MAX_LEN),
        lambda m, t, tok: probe_layers(
            m, ProbeWindows(*[torch.zeros(2, 2 * MAX_LEN, dtype=torch.long)] * 3)
        ),  # another model's
        lambda m, t, tok: probe_predictions(
            m, ProbeWindows(*[torch.zeros(2, 2 * MAX_LEN, dtype=torch.long)] * 3), layer=0
        ),
        lambda m, t, tok: attention_maps(m, tok, " ".join(["cat"] * 2 * MAX_LEN), layer=1, head=0),
    ],
    ids=[
        "loss_by_position",
        "word_order",
        "context_use",
        "probe_windows",
        "probe_layers",
        "probe_predictions",
        "attention_maps",
    ],
)
def test_learned_beyond_max_len_is_an_error_outside_perplexity(call, models, tokens, tokenizer):
    "perplexity_by_length reports NaN with a reason instead (nbs/04a_evaluate); everything else refuses."
    model = models["learned"]
    message = error_message(lambda: call(model, small_tokens(tokens, model.config.vocab_size), tokenizer))
    assert f"max_len={MAX_LEN}" in message, message  # the limit
    assert number_in(2 * MAX_LEN, message), message  # the length asked for (" cat" is one token)


def test_a_length_limit_is_read_from_the_encoding(tokens, monkeypatch):
    "Any encoding that declares a `length_limit` is treated as learned positions are: no name is special-cased."

    class Window(PositionalEncoding):
        "A toy with no positions past max_len."

        name, label, color, length_limit = "window", "Window (toy)", "#17becf", True

    monkeypatch.setitem(ENCODINGS, "window", Window)
    model = tiny("window")
    t = small_tokens(tokens, model.config.vocab_size)
    df = perplexity_by_length(model, t, [MAX_LEN, 2 * MAX_LEN], max_tokens=256)
    assert df.perplexity.notna().tolist() == [True, False] and f"max_len={MAX_LEN}" in df.note[1]
    message = error_message(lambda: loss_by_position(model, t, 2 * MAX_LEN))
    assert f"max_len={MAX_LEN}" in message and "Window (toy)" in message, message


def test_too_few_tokens_for_the_context(models, tokens):
    model = models["nopos"]
    few = small_tokens(tokens[:10], model.config.vocab_size)
    for call in (
        lambda: loss_by_position(model, few, 64),
        lambda: probe_windows(model, few, few, seq_len=64),
        lambda: context_use(model, few, short=8, long=64, stride=4),
    ):
        message = error_message(call)
        assert number_in(64, message) and number_in(10, message), message  # the context and the tokens there are


# --- layers and heads that do not exist ------------------------------------------------------------------------------
@pytest.mark.parametrize("layer", [-1, 3, 2.0, "1"])
def test_probe_layer_that_does_not_exist(layer, models, tokens):
    model = models["nopos"]
    t = small_tokens(tokens, model.config.vocab_size)
    windows = probe_windows(model, t, t, seq_len=8, n_train=4, n_select=2, n_eval=2)
    for call in (
        lambda: probe_layers(model, windows, layers=[layer], epochs=1),
        lambda: probe_predictions(model, windows, layer=layer, epochs=1),
    ):
        message = error_message(call)
        assert f"layer {layer!r}" in message and "0..2" in message, message  # the layer asked for, the layers there are


@pytest.mark.parametrize("layer", [0, 3])
def test_attention_grid_layer_that_does_not_exist(layer, models, tokenizer):
    "attention_maps refuses these layers in nbs/04e_attention; the grid checks its `layers` the same way."
    message = error_message(lambda: plot_attention_grid(models["nopos"], tokenizer, SENTENCE, layers=[layer]))
    assert f"layer {layer}" in message and "1..2" in message, message


def test_negative_head_does_not_exist(models, tokenizer):
    "A head past the last one is refused in nbs/04e_attention; a negative one (a valid Python index) is refused too."
    message = error_message(lambda: attention_maps(models["nopos"], tokenizer, SENTENCE, layer=1, head=-1))
    assert "head -1" in message and "0..1" in message, message


# --- arguments out of range
# ----------------------------------------------------------------------------------------------
def test_bad_arguments(models, tokens, tokenizer):
    model = models["nopos"]
    t = small_tokens(tokens, model.config.vocab_size)
    bad_calls = [  # (call, facts its message must carry)
        (lambda: perplexity_by_length(model, t, [0]), ["context_length", "got 0"]),
        (lambda: perplexity_by_length(model, t, [8], protocol="sliding", stride=0), ["stride", "got 0"]),
        (lambda: shuffle_words(SENTENCE, [0, 1, 2]), ["[0, 1, 2]", "0..5"]),
        (lambda: permutation_gap(model, tokenizer, SENTENCE, [0, 1, 1, 2, 3, 4]), ["[0, 1, 1, 2, 3, 4]", "0..5"]),
        (lambda: masked_perplexity(models["mlm"], t, 8, mask_prob=1.5), ["mask_prob", "1.5"]),
    ]
    for call, facts in bad_calls:
        message = error_message(call)
        assert all(fact in message for fact in facts), (facts, message)


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
    with pytest.raises(ValueError, match="empty"):
        plot_by_encoding(ax, pd.DataFrame(columns=["encoding", "layer", "mad"]), "layer", "mad")
    with pytest.raises(ValueError, match=r"'\.jpg'"):  # the suffix at fault
        savefig(fig, tmp_path / "figure.jpg")
    assert not list(tmp_path.iterdir()), "a refused savefig writes nothing"
