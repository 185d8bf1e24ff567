"""Analyses run where the model is, under the autocast a GPU trains with, tested on the CPU; and `load_run` gives back
the model as trained, in float32 or in bfloat16.

On a GPU, `frozen` (which every analysis goes through) runs the model under bfloat16 autocast, as training with
`dtype="auto"` does there. Here the CPU is given the same autocast through `AUTOCAST_DTYPES`, so the bfloat16 path of
each analysis runs without a GPU: it must come back in full precision, close to the float32 numbers, and visibly not
the float32 computation itself.
"""

from unittest import mock

import numpy as np
import pytest
import torch

from posenc_nb.attention import all_attention
from posenc_nb.checkpoint import load_run
from posenc_nb.config import TrainConfig
from posenc_nb.counting import attention_entropy, attention_output
from posenc_nb.evaluate import perplexity_by_length
from posenc_nb.order import loss_by_position, masked_perplexity, word_order_losses
from posenc_nb.model import ModelConfig, TransformerLM
from posenc_nb.probe import hidden_states
from posenc_nb.train import Trainer
from posenc_nb.model import AUTOCAST_DTYPES, frozen


def tiny(pos_encoding: str, causal: bool = True) -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(
        ModelConfig(
            vocab_size=300, n_layer=2, n_head=2, d_model=32, max_len=64, pos_encoding=pos_encoding, causal=causal
        )
    ).eval()


@pytest.fixture(scope="module")
def tokens():
    return np.random.default_rng(0).integers(3, 300, 4_000).astype(np.uint16)


def windows(tokens, n: int, length: int = 32) -> torch.Tensor:
    return torch.as_tensor(tokens[: n * length].astype(np.int64)).view(n, length)


ANALYSES = {
    "perplexity": lambda m, t: perplexity_by_length(m, t, [32], max_tokens=1024).perplexity.to_numpy(),
    "loss_by_position": lambda m, t: loss_by_position(m, t, 32, n_buckets=4, max_tokens=1024).loss.to_numpy(),
    "word_order": lambda m, t: word_order_losses(m, t, 32, n_samples=8).loss_intact.to_numpy(),
    "hidden_states": lambda m, t: hidden_states(m, windows(t, 2)).numpy(),
    "attention": lambda m, t: all_attention(m, windows(t, 1)[0]).numpy(),
    "entropy": lambda m, t: attention_entropy(m, windows(t, 2)).entropy.to_numpy(),
    "attention_output": lambda m, t: attention_output(m, windows(t, 2)).numpy(),
}


@pytest.mark.parametrize("encoding", ["nopos", "learned", "rope", "alibi"])
@pytest.mark.parametrize("analysis", ANALYSES)
def test_analyses_under_bfloat16_autocast(analysis, encoding, tokens):
    model = tiny(encoding)
    full = ANALYSES[analysis](model, tokens)
    with mock.patch.dict(AUTOCAST_DTYPES, cpu=torch.bfloat16):
        with frozen(model):
            assert model(windows(tokens, 1)).logits.dtype == torch.bfloat16  # the autocast is on
        half = ANALYSES[analysis](model, tokens)
    assert half.dtype == full.dtype and half.shape == full.shape  # back in full precision
    assert np.allclose(half, full, rtol=0.05, atol=0.02), np.abs(half - full).max()
    assert not np.array_equal(half, full)  # it did run in bfloat16


def test_masked_perplexity_under_bfloat16_autocast(tokens):
    model = tiny("alibi", causal=False)
    full = masked_perplexity(model, tokens, 32, max_tokens=1024).perplexity[0]
    with mock.patch.dict(AUTOCAST_DTYPES, cpu=torch.bfloat16):
        half = masked_perplexity(model, tokens, 32, max_tokens=1024).perplexity[0]
    assert half == pytest.approx(full, rel=0.05) and half != full


@pytest.mark.parametrize("encoding", ["rope", "xpos", "sinusoidal", "alibi"])
def test_load_run_gives_back_the_trained_model(tmp_path, encoding):
    """Every weight and buffer as trained (Module.to(dtype) once made RoPE's complex turns real: wrong within max_len
    only)."""
    cfg = TrainConfig.from_preset(
        "smoke",
        pos_encoding=encoding,
        n_layer=1,
        d_model=16,
        n_head=2,
        seq_len=16,
        batch_size=4,
        max_steps=2,
        warmup_steps=1,
        eval_batches=1,
    )
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    trainer.fit()
    trainer.close()
    trained = trainer.model.eval()  # the weights in memory at the end of training, not read back
    ids = torch.arange(3, 19)[None]
    with torch.no_grad():
        assert torch.equal(load_run(tmp_path / "run").model(ids).logits, trained(ids).logits)
        half = load_run(tmp_path / "run", dtype=torch.bfloat16).model
        assert {p.dtype for p in half.parameters()} == {torch.bfloat16}
        assert all(torch.equal(a, b) for a, b in zip(half.buffers(), trained.buffers()))  # derived constants kept exact
        assert torch.allclose(half(ids).logits.float(), trained(ids).logits, rtol=0.1, atol=0.1)
