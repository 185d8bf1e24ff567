"""The checks nbs/01c_guards' examples moved out (issue 58, item 5): every input a guard refuses beyond the one each
example shows (empty, 2-D or float tokens, a zero or unbounded context, lengths not given as a list, layers out of range
or none), checked here on the library with the chapter's untrained models."""

import numpy as np
import pytest

from posenc_nb.guards import check_context_length, check_context_lengths, check_layer, check_layers, check_tokens
from posenc_nb.model import ModelConfig, TransformerLM

model = TransformerLM(ModelConfig(vocab_size=300, n_layer=2, n_head=2, d_model=16, max_len=16, pos_encoding="nopos"))


@pytest.mark.parametrize(
    "tokens, message",
    [
        (np.arange(10, dtype=np.uint16)[:0], "is empty"),
        (np.zeros((2, 3), dtype=int), "1-D"),
        (np.array([0.5]), "integer token ids"),
    ],
)
def test_check_tokens_refuses(tokens, message):
    with pytest.raises(ValueError, match=message):
        check_tokens(model, tokens)


def test_a_model_without_positions_runs_any_positive_length():
    assert check_context_length(model, 1024) == 1024
    with pytest.raises(ValueError, match="positive integer"):
        check_context_length(model, 0)


@pytest.mark.parametrize("lengths, message", [([], "context_lengths is empty"), (64, "got 64"), ("64", "got '64'")])
def test_check_context_lengths_refuses(lengths, message):
    with pytest.raises(ValueError, match=message):
        check_context_lengths(lengths)


def test_check_layers_keeps_numpy_integers_and_refuses_none_or_out_of_range():
    assert check_layers(model, [np.int64(2), 0]) == [2, 0]
    with pytest.raises(ValueError, match="no layers"):
        check_layers(model, [])
    for bad in (3, -1):
        with pytest.raises(ValueError, match=rf"layer {bad} does not exist: this model has hidden states 0\.\.2"):
            check_layer(model, bad)
