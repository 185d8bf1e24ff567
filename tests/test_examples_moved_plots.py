"""The checks nbs/04_plots' examples moved out (issue 58, item 5): the chapter shows each helper once; the captions'
other cases, the figures' details and every refusal are checked here, on the library."""

from types import SimpleNamespace as NS

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from posenc_nb.encodings import ENCODINGS
from posenc_nb.plots import (
    add_caption,
    caption,
    encoding_color,
    encoding_label,
    loss_limits,
    new_figure,
    plot_by_encoding,
    run_caption,
    run_tokens,
    runs_unit,
    savefig,
    style_axes,
)
from posenc_nb.special_tokens import MIN_VOCAB_SIZE
from support import refused


def test_an_encodings_colour_is_its_own_and_a_typo_is_named():
    assert encoding_color("kerple") == ENCODINGS["kerple"].color
    with refused("positional encoding must be one of nopos"):
        encoding_color("alibii")
    with refused("got 'alibii' (did you mean 'alibi'?)"):
        encoding_label("alibii")


def test_runs_are_drawn_in_bytes_only_when_every_one_reads_bytes():
    byte_run, subword_run = (NS(config=NS(vocab_size=v)) for v in (MIN_VOCAB_SIZE, 2048))
    assert (runs_unit([byte_run, byte_run]), runs_unit([byte_run, subword_run])) == ("byte", "token")


@pytest.mark.parametrize(
    "args, kwargs, line",
    [
        (("cpu", "brown", 10**6, [3]), {}, "profile cpu · corpus brown · 1M training tokens per model · seed 3"),
        (
            ("cpu", "shakespeare", 4_096_000, [0]),
            dict(unit="byte"),
            "profile cpu · corpus shakespeare · 4.1M training bytes per model · seed 0",
        ),
        (
            ("cpu", "brown", {"clm": 10**6, "mlm": 4 * 10**6}, [0]),
            {},
            "profile cpu · corpus brown · training tokens per model: 1M (clm), 4M (mlm) · seed 0",
        ),
    ],
)
def test_caption(args, kwargs, line):
    assert caption(*args, **kwargs) == line


def test_a_caption_gives_one_count_when_all_agree_and_needs_a_seed_and_a_group():
    assert caption("cpu", "brown", {"clm": 10**6, "mlm": 10**6}, [0]) == caption("cpu", "brown", 10**6, [0])
    with refused("at least one seed"):
        caption("cpu", "brown", 10**6, [])
    with refused("at least one group"):
        caption("cpu", "brown", {}, [0])


def toy_run(step=30, **config):
    defaults = dict(corpus="shakespeare", task=None, objective="clm", batch_size=8, seq_len=64, seed=0, vocab_size=2048)
    return NS(step=step, device=torch.device("cpu"), config=NS(**defaults | dict(dtype="auto") | config))


def test_run_captions_of_steps_tasks_and_bytes():
    runs = [toy_run(seed=s) for s in (0, 1)]
    mixed = runs + [toy_run(objective="mlm", batch_size=32, seed=s) for s in (0, 1)]
    assert "training tokens per model: 15.4k (clm, batch 8), 61.4k (mlm, batch 32)" in run_caption(mixed, "smoke")
    # alike but for the steps they ran
    assert run_tokens(runs + [toy_run(step=10)]) == {"30 steps": 15_360, "seed 0, 10 steps": 5_120}
    assert (
        run_caption([toy_run(task="repeat", seed=s) for s in (0, 1)], "cpu")
        == "profile cpu · 15.4k training tokens per model · seeds 0, 1 · synthetic task repeat"
    )  # no corpus: a task
    assert "15.4k training bytes per model" in run_caption([toy_run(vocab_size=MIN_VOCAB_SIZE)], "cpu")
    with refused("at least one training run"):
        run_caption([], "smoke")


def test_style_axes_labels_every_axis():
    fig, ax = new_figure()
    style_axes(ax, "context length (tokens)", "perplexity", logx=True, logy=True)
    assert ax.get_xlabel() == "context length (tokens)"
    with refused("every axis needs a label"):
        style_axes(ax, "", "perplexity")
    plt.close(fig)


@pytest.fixture
def toy_figure():
    "The chapter's figure: ALiBi of one seed, NoPos of two, NoPos's last point NaN for both."
    df = pd.DataFrame(
        {
            "encoding": ["alibi"] * 3 + ["nopos"] * 6,
            "context_length": [32, 64, 128] + [32, 64, 128] * 2,
            "perplexity": [20, 18, 17, 25, 22, np.nan, 27, 24, np.nan],
        }
    )
    fig, ax = new_figure()
    plot_by_encoding(ax, df, "context_length", "perplexity")
    style_axes(ax, "context length (tokens)", "perplexity", logx=True, logy=True, legend=True)
    add_caption(fig, caption("example", "toy numbers", 0, [0, 1]))
    yield fig, ax, df
    plt.close(fig)


def test_a_line_in_its_encodings_colour_no_value_invented_and_a_band_only_for_several_seeds(toy_figure):
    _, ax, _ = toy_figure
    assert ax.get_lines()[0].get_color() == encoding_color("nopos")
    assert np.isnan(ax.get_lines()[0].get_ydata()[2])
    assert len(ax.collections) == 1


def test_plot_by_encoding_refuses_a_missing_column_or_encoding(toy_figure):
    _, ax, df = toy_figure
    with refused("no column(s) ['ppl']"):
        plot_by_encoding(ax, df, "context_length", "ppl")
    with refused("the DataFrame's 'encoding' column: each entry must be one of nopos"):
        plot_by_encoding(ax, df.assign(encoding="cope"), "context_length", "perplexity")


def test_savefig_writes_a_png_takes_a_bare_name_and_refuses_other_formats(toy_figure, tmp_path):
    fig, _, _ = toy_figure
    written = savefig(fig, tmp_path / "sub" / "perplexity.png")
    assert written[0].read_bytes()[:4] == b"\x89PNG"
    assert savefig(fig, tmp_path / "sub" / "perplexity") == written
    with refused("not '.pdf'"):
        savefig(fig, tmp_path / "x.pdf")


def logged(train, val=None, warmup_steps=5):
    "A run's stand-in that logged `train` (and `val`) losses every 10 steps."
    steps = range(10, 10 * len(train) + 1, 10)
    metrics = pd.DataFrame(dict(step=steps, train_loss=train, val_loss=val or [np.nan] * len(train)))
    return NS(metrics=metrics, config=NS(warmup_steps=warmup_steps))


def test_loss_limits_keep_validation_and_a_run_still_warming_up():
    falling = logged([7.8, 3.5, 2.9, 2.6, 2.5, 2.4, 2.35, 2.3, 2.25, 2.2])
    validated = logged([7.8, 3.0, 2.8, 2.7, 2.6, 2.6, 2.5, 2.5, 2.5, 2.5], [np.nan] * 9 + [2.0])
    assert loss_limits([falling, validated])[0] < 2.0
    # nothing after the warm-up yet: its own loss
    assert loss_limits([logged([6.0], warmup_steps=20)]) == pytest.approx((5.9, 6.1))
