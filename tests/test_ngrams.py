"""The n-gram references: add-k models whose context pays where the stream has structure, scored in windows as the
transformers are."""

import numpy as np
import pytest

from posenc_nb.ngrams import addk_log_probs, held_out_k, ngram_losses


def _markov_stream(n: int = 20_000, seed: int = 0) -> np.ndarray:
    "Tokens 0-3 where each token is the one before it plus 1 (mod 4), nine times in ten: a bigram's world."
    rng = np.random.default_rng(seed)
    tokens = np.zeros(n, dtype=np.int64)
    for i in range(1, n):
        tokens[i] = (tokens[i - 1] + 1) % 4 if rng.random() < 0.9 else rng.integers(4)
    return tokens


def test_a_bigram_finds_what_a_unigram_cannot():
    stream = _markov_stream()
    table = ngram_losses(stream[:15_000], stream[15_000:], vocab_size=4, orders=[1, 2, 3])
    unigram, bigram, trigram = table.loss
    assert unigram == pytest.approx(np.log(4), abs=0.02)  # every token equally often
    assert bigram < unigram - 0.8 and abs(trigram - bigram) < 0.02  # the previous token is all there is to know
    assert table.gain.iloc[1] == pytest.approx(unigram - bigram)


def test_a_window_of_one_leaves_every_order_a_unigram():
    stream = _markov_stream()
    table = ngram_losses(stream[:15_000], stream[15_000:], vocab_size=4, orders=[1, 2, 3], window=1)
    assert table.loss.to_numpy() == pytest.approx([table.loss.iloc[0]] * 3)


def test_k_is_chosen_on_training_tokens_and_bad_input_is_named():
    stream = _markov_stream()
    assert held_out_k(stream, 2, vocab_size=4) < 1.0  # well-counted bigrams want little smoothing
    with pytest.raises(ValueError, match="outside a vocabulary of 4"):
        addk_log_probs(stream, [0, 7], 2, vocab_size=4, k=0.1)
    with pytest.raises(ValueError, match="k above zero"):
        addk_log_probs(stream, [0, 1], 2, vocab_size=4, k=0.0)
    with pytest.raises(ValueError, match="scoring window"):
        ngram_losses(stream, stream, vocab_size=4, window=0)
