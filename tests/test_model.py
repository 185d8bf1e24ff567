"Model behaviour that does not fit the notebooks: both attention paths, every encoding, causality, dtypes, checkpoints."

import dataclasses
import json
from functools import partial

import pytest
import torch
import torch.nn.functional as F

import posenc_nb.model
from posenc_nb.checkpoint import CheckpointError, load_weights, save_checkpoint
from posenc_nb.config import TrainConfig
from posenc_nb.encodings import ENCODINGS
from posenc_nb.model import MODEL_VERSION, PRESETS, ModelConfig, TransformerLM, check_token_ids
from support import SMALL


def make(name, causal=True, **overrides):
    torch.manual_seed(0)
    return TransformerLM(dataclasses.replace(SMALL, pos_encoding=name, causal=causal, **overrides)).eval()


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("name", list(ENCODINGS))
def test_fused_and_explicit_paths_agree(name, causal):
    model = make(name, causal)
    idx = torch.randint(0, SMALL.vocab_size, (3, 40))
    with torch.no_grad():
        fused = model(idx, output_hidden_states=True)
        explicit = model(idx, output_hidden_states=True, output_attentions=True)
    torch.testing.assert_close(fused.logits, explicit.logits, atol=1e-5, rtol=1e-5)
    for a, b in zip(fused.hidden_states, explicit.hidden_states):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert len(explicit.attentions) == SMALL.n_layer
    assert explicit.attentions[0].shape == (3, SMALL.n_head, 40, 40)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("name", list(ENCODINGS))
def test_query_blocks_give_the_logits_of_the_whole_bias(name, causal, monkeypatch):
    """Blocks of 32 queries over 150 tokens (4 of 32 and one of 22) give the logits of one block and of the explicit
    path."""
    model = make(name, causal, max_len=150)
    idx = torch.randint(0, SMALL.vocab_size, (2, 150))
    with torch.no_grad():
        whole, explicit = model(idx).logits, model(idx, output_attentions=True).logits
        monkeypatch.setattr(posenc_nb.model, "fused_attention", partial(posenc_nb.model.fused_attention, block=32))
        blocked = model(idx).logits
    torch.testing.assert_close(blocked, whole, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(blocked, explicit, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_bfloat16_autocast(name):
    model = make(name)
    idx = torch.randint(0, SMALL.vocab_size, (2, 48))
    with torch.no_grad():
        reference = model(idx).logits
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model(idx).logits
    assert low.dtype == torch.bfloat16
    assert (low.float() - reference).abs().max() < 0.05


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_checkpoint_round_trip(name, tmp_path):
    model = make(name)
    torch.save({"config": dataclasses.asdict(model.config), "state": model.state_dict()}, tmp_path / "model.pt")
    saved = torch.load(tmp_path / "model.pt")
    restored = TransformerLM(ModelConfig(**saved["config"])).eval()
    restored.load_state_dict(saved["state"])
    idx = torch.randint(0, SMALL.vocab_size, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(restored(idx).logits, model(idx).logits)
    position_keys = [k for k in saved["state"] if k.startswith("pos.")]
    assert position_keys == [
        f"pos.{k}" for k in model.pos.state_dict()
    ]  # the encoding's parameters; caches are not saved
    if name in (
        "nopos",
        "learned",
        "sinusoidal",
        "rope",
        "alibi",
    ):  # the paper's five: nothing but learned positions saved
        assert position_keys == (["pos.table.weight"] if name == "learned" else [])


def test_a_checkpoint_of_an_earlier_model_version_is_refused(tmp_path):
    """A sinusoidal run saved under version 2 (the original Transformer's table, which no checkpoint holds) does not
    load silently."""
    cfg = TrainConfig.from_preset("smoke", pos_encoding="sinusoidal")
    model = TransformerLM(cfg.model_config())
    save_checkpoint(tmp_path, model, torch.optim.AdamW(model.parameters()), cfg, step=1, tokens=1, finished=False)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["model_version"] == MODEL_VERSION == 3
    load_weights(model, tmp_path, meta)
    with pytest.raises(CheckpointError, match="model version 2"):
        load_weights(model, tmp_path, {**meta, "model_version": 2})


@pytest.mark.parametrize(
    "name", ["rope", "sinusoidal", "alibi", "xpos", "t5", "kerple"]
)  # FIRE's threshold follows max_len
def test_long_inputs_match_a_longer_cache_and_change_nothing(name):
    model = make(name)
    buffers = dict(model.named_buffers())
    idx = torch.randint(0, SMALL.vocab_size, (1, 20))
    long_idx = torch.randint(0, SMALL.vocab_size, (1, 5 * SMALL.max_len))
    longer = TransformerLM(dataclasses.replace(model.config, max_len=5 * SMALL.max_len)).eval()
    longer.load_state_dict(model.state_dict())
    with torch.no_grad():
        before = model(idx).logits
        torch.testing.assert_close(model(long_idx).logits, longer(long_idx).logits, atol=0, rtol=0)
        torch.testing.assert_close(model(idx).logits, before, atol=0, rtol=0)
    after = dict(model.named_buffers())
    assert after.keys() == buffers.keys() and all(after[n] is b for n, b in buffers.items())


def test_dropout_only_in_training():
    model = make("rope", dropout=0.5)
    idx = torch.randint(0, SMALL.vocab_size, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(model(idx).logits, model(idx).logits)
        model.train()
        assert not torch.allclose(model(idx).logits, model(idx).logits)


def test_training_reduces_loss():
    model = make("alibi").train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = torch.arange(33).repeat(8, 1) % SMALL.vocab_size  # a fixed, learnable sequence
    losses = []
    for _ in range(30):
        loss = F.cross_entropy(model(batch[:, :-1]).logits.flatten(0, 1), batch[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("preset", list(PRESETS))
def test_presets_build(preset):
    with torch.device("meta"):
        model = TransformerLM(ModelConfig.from_preset(preset, pos_encoding="learned"))
    cfg = model.config
    assert model.num_params() > 12 * cfg.n_layer * cfg.d_model**2  # at least the blocks' weights


def test_cpu_presets_increase_in_size():
    sizes = [TransformerLM(ModelConfig.from_preset(p)).num_params() for p in ("cpu-tiny", "cpu-small", "cpu-base")]
    assert sizes == sorted(sizes) and len(set(sizes)) == 3


@pytest.mark.parametrize(
    "kwargs, facts",
    [
        (dict(n_head=0), ["n_head", "0"]),
        (dict(vocab_size=True), ["vocab_size", "True"]),
        (dict(d_model=30, n_head=4), ["d_model=30", "n_head=4"]),
        (dict(pos_encoding="ROPE"), ["'ROPE'", *ENCODINGS]),
        (dict(dropout=-0.1), ["dropout", "-0.1"]),
        (dict(pos_encoding="t5", pos_options=dict(bucket=16)), ["'bucket'", "buckets", "max_distance"]),
        (dict(pos_encoding="rope", pos_options=dict(factor=0.5)), ["factor", "0.5"]),
        (dict(pos_options="base=10"), ["pos_options", "base=10"]),
    ],
)
def test_bad_configs(kwargs, facts):
    with pytest.raises(ValueError) as error:
        dataclasses.replace(SMALL, **kwargs)
    for fact in facts:
        assert fact in str(error.value)


def test_bad_inputs_raise_value_errors_that_name_the_values():
    with pytest.raises(ValueError) as error:
        make("nopos")(torch.zeros(2, 4))
    assert "torch.float32" in str(error.value) and "(2, 4)" in str(error.value)
    with pytest.raises(ValueError) as error:
        check_token_ids(torch.tensor([[-1, 3]]), SMALL.vocab_size)
    assert "vocab_size=97" in str(error.value) and "-1 to 3" in str(error.value)


@pytest.mark.parametrize("bias", [False, True])
def test_explicit_path_backward_with_dropout_matches_autograd(bias):
    """The explicit path's written-out backward, dropout's mask included, gives autograd's gradients through the same
    formula, in float32 (the same seed draws the same mask)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 10, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    table = torch.randn(1, 3, 10, 10, dtype=torch.float64, requires_grad=True) if bias else None
    later = torch.ones(10, 10, dtype=torch.bool).triu(1)

    def by_autograd():
        scores = q @ k.transpose(-2, -1) / 8**0.5 + (0 if table is None else table)
        probs = scores.masked_fill(later, float("-inf")).softmax(-1)
        return F.dropout(torch.ones_like(probs), 0.3) * probs @ v

    grads = []
    for attend in (lambda: posenc_nb.model.explicit_attention(q, k, v, table, True, 0.3)[0], by_autograd):
        torch.manual_seed(1)
        out = attend()
        inputs = [q, k, v] + ([table] if bias else [])
        grads.append(torch.autograd.grad((out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum(), inputs))
    for ours, reference in zip(*grads):
        torch.testing.assert_close(ours, reference)
