"""The checks nbs/07a_interop's examples moved out (issue 58, item 5): the chapter shows what TransformerLens can
hold and one refusal of each kind; every other configuration it refuses or maps is checked here, on the library."""

import pytest

from posenc_nb.interop import bridge_config, check_mappable, lens_module
from posenc_nb.model import ModelConfig

pytest.importorskip("transformer_lens")


def rope(**options) -> ModelConfig:
    return ModelConfig(pos_encoding="rope", pos_options=options)


def test_the_extra_when_installed():
    assert lens_module("transformer_lens.config").__name__ == "transformer_lens.config"


def test_an_ntk_scaling_goes_over():
    assert check_mappable(rope(scaling="ntk", factor=4.0)).pos_options["scaling"] == "ntk"


@pytest.mark.parametrize(
    "config, message",
    [
        (rope(base=10000.5), "integer"),
        (ModelConfig(start_token=0), "start_token cannot be opened"),
        (ModelConfig(pos_encoding="rope", nopos_layers="last"), "every layer the same positions"),
        (ModelConfig(pos_options=dict(attn_scale=0.1)), "scales no query by its position"),
        (rope(fraction=0.25, base=500.0), "partial RoPE (fraction=0.25)"),
        (rope(fraction=0.5, scaling="pi", factor=2.0), "and no scaling"),
    ],
)
def test_what_the_native_model_cannot_hold_is_refused(config, message):
    with pytest.raises(ValueError) as error:
        check_mappable(config)
    assert message in str(error.value)


def test_a_bidirectional_model_attends_both_ways_and_fire_is_refused():
    assert bridge_config(ModelConfig(causal=False), 128).attention_dir == "bidirectional"
    with pytest.raises(ValueError, match="cannot be opened"):
        bridge_config(ModelConfig(pos_encoding="fire"), 128)
