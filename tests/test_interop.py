"""TransformerLens parity (posenc_nb.interop, nbs/07a_interop): a trained smoke run of every encoding it can hold gives
our logits in TransformerLens to 1e-4 in float32 on 8 windows, and comes back the same model; the rest are refused by
name.

What the chapter's examples check on untrained models (bidirectional twins, longer contexts, RoPE scalings, the hooks)
is not repeated here: these are trained runs, loaded from their folders as a reader would open them."""

import re
import sys

import pytest
import torch

from posenc_nb.config import TrainConfig
from posenc_nb.encodings import ENCODINGS
from posenc_nb.interop import INTERP_INSTALL, MAPPED, REFUSED, from_hooked_transformer, to_hooked_transformer
from posenc_nb.model import ModelConfig, TransformerLM
from posenc_nb.probe import sample_sequences
from posenc_nb.tokens import load_tokens
from posenc_nb.train import train

TOLERANCE = 1e-4  # max |logit difference|, float32
BYTES = dict(vocab_size=259, n_layer=2)  # the smoke preset on bytes, with a second block to stack


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    "A smoke run of every encoding TransformerLens can hold, trained into a temporary folder."
    root = tmp_path_factory.mktemp("runs")
    return {
        name: train(TrainConfig.from_preset("smoke", pos_encoding=name, **BYTES), out_dir=root / name, progress=False)
        for name in MAPPED
    }


@pytest.fixture(scope="module")
def windows(runs):
    "8 windows of the validation bytes, as long as the runs' context."
    run = runs["nopos"]
    tokens = load_tokens(run.config.corpus, "validation", vocab_size=run.config.vocab_size)
    return sample_sequences(run.model, tokens, n=8, seq_len=run.config.seq_len, seed=0)


@pytest.mark.parametrize("name", list(MAPPED))
def test_a_trained_run_has_our_logits_in_transformer_lens(name, runs, windows):
    run = runs[name]
    model, bridge = run.model, to_hooked_transformer(run.out_dir)  # opened from its folder
    with torch.no_grad():
        gap = (model(windows).logits - bridge(windows)).abs().max().item()
    print(f"{name}: max |logit difference| {gap:.2e}")
    assert gap <= TOLERANCE, f"{name}: logits differ by up to {gap:.3g}"
    back = from_hooked_transformer(bridge)
    assert back.config == model.config
    with torch.no_grad():
        assert torch.equal(back(windows).logits, model(windows).logits)


@pytest.mark.parametrize("name", list(REFUSED))
def test_encodings_it_cannot_hold_are_refused_naming_those_it_can(name):
    with pytest.raises(ValueError) as error:
        to_hooked_transformer(
            TransformerLM(ModelConfig(vocab_size=259, n_layer=1, n_head=2, d_model=32, max_len=16, pos_encoding=name))
        )
    message = str(error.value)
    assert name in message and all(mapped in message for mapped in MAPPED)


def test_every_encoding_is_held_or_refused():
    assert set(MAPPED) | set(REFUSED) == set(ENCODINGS)


def test_without_the_extra_the_converter_names_it(monkeypatch):
    for module in [m for m in sys.modules if m.split(".")[0] == "transformer_lens"] + ["transformer_lens"]:
        monkeypatch.setitem(sys.modules, module, None)  # as if transformer-lens were not installed
    model = TransformerLM(ModelConfig(vocab_size=259, n_layer=1, n_head=2, d_model=32, max_len=16))
    with pytest.raises(ImportError, match=re.escape(INTERP_INSTALL)):
        to_hooked_transformer(model)
