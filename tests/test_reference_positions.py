"""Positions as practised now, against the code that defined them (no network; each skips cleanly without its package):
the layers without positions against Hugging Face's `no_rope_layers` (Llama 4, SmolLM3), Llama 4's query temperature
against its attention layer, partial RoPE against x-transformers' `rotary_emb_dim`. The formulas themselves are checked
in nbs/01_encodings, the hybrids' routing in nbs/01b_model, and that no variant sees a later token in test_encodings."""

import pytest
import torch

from posenc_nb.encodings import get_encoding, nopos_layers


@pytest.mark.parametrize("family", ["llama4", "smollm3"])
@pytest.mark.parametrize("n_layer, interval", [(4, 2), (4, 4), (8, 4), (12, 3), (48, 4)])
def test_every_k_is_hugging_faces_no_rope_layer_interval(family, n_layer, interval):
    "Hugging Face lists a 1 for each layer with RoPE; the layers it lists a 0 for are ours without positions."
    pytest.importorskip("transformers")
    if family == "llama4":
        from transformers.models.llama4.configuration_llama4 import Llama4TextConfig as Config
    else:
        from transformers.models.smollm3.configuration_smollm3 import SmolLM3Config as Config
    flags = Config(num_hidden_layers=n_layer, no_rope_layer_interval=interval).no_rope_layers
    assert [i for i, rope in enumerate(flags) if not rope] == nopos_layers(f"every-{interval}", n_layer)


def test_the_temperature_is_llama_4s_on_its_layers_without_rope(monkeypatch):
    "The queries Llama 4's attention layer without RoPE hands to its kernel, over its projected ones, are our factors."
    pytest.importorskip("transformers")
    from transformers.models.llama4 import modeling_llama4
    from transformers.models.llama4.configuration_llama4 import Llama4TextConfig

    config = Llama4TextConfig(
        num_hidden_layers=4,
        hidden_size=32,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=64,
        intermediate_size_mlp=64,
        vocab_size=50,
        floor_scale=4,
        attn_scale=0.1,
    )
    config._attn_implementation = "eager"
    attention = modeling_llama4.Llama4TextAttention(config, layer_idx=3).eval()  # layer 3: no RoPE, the temperature on
    assert not attention.use_rope
    handed = {}

    def kernel(module, query, key, value, mask, **kwargs):
        handed["query"] = query
        return torch.zeros(query.shape[0], query.shape[2], query.shape[1], query.shape[3]), None

    monkeypatch.setattr(modeling_llama4, "eager_attention_forward", kernel)
    T, x = 40, torch.randn(1, 40, 32)
    with torch.no_grad():
        attention(x, position_embeddings=None, attention_mask=None)
        projected = attention.q_proj(x).view(1, T, 2, 16).transpose(1, 2)
        ours = get_encoding("nopos", 32, 2, T, attn_scale=0.1, floor_scale=4).rotate(projected, projected)[0]
    torch.testing.assert_close(ours, handed["query"], rtol=1e-6, atol=1e-6)
    assert handed["query"][0, 0, -1].norm() > 1.2 * projected[0, 0, -1].norm()  # it acts: 1 + 0.1 ln 11 at position 39


@pytest.mark.parametrize("fraction", [0.25, 0.5, 1.0])
def test_partial_rope_is_x_transformers_rotary_emb_dim_with_the_base_raised(fraction):
    """x-transformers turns the first r = fraction x head_dim dimensions at base'^(-2j/r): ours at
    base^(-2j/head_dim) when base' = base^fraction."""
    x_transformers = pytest.importorskip("x_transformers.x_transformers")
    head_dim, T, base = 32, 300, 10000.0
    rotary = x_transformers.RotaryEmbedding(int(fraction * head_dim), base=base**fraction)
    q = torch.randn(2, 4, T, head_dim)
    with torch.no_grad():
        freqs, _ = rotary.forward_from_seq_len(T)
        theirs = x_transformers.apply_rotary_pos_emb(q, freqs)
        ours = get_encoding("rope", 4 * head_dim, 4, 128, fraction=fraction).rotate(q, q)[0]  # beyond max_len too
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)
    assert torch.equal(ours[..., int(fraction * head_dim) :], q[..., int(fraction * head_dim) :])
