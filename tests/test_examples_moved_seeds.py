"""The checks nbs/05a_seeds' examples moved out (issue 58, item 5): the summaries' columns, order and refusals, the
half-widths' other cases, every outcome of `seed_gap` and `side` beyond the chapter's, the orders' and sentences' other
cases and the power law's refusals and ends, checked here on the library."""

import math
import re

import numpy as np
import pandas as pd
import pytest

from posenc_nb.seeds import (
    draw_halfwidth,
    format_mean_std,
    gap_trend,
    gap_verdicts,
    paired_halfwidth,
    per_seed,
    power_law_fit,
    power_law_reach,
    quoted,
    seed_gap,
    seed_summary,
    side,
    spread_order,
    t_quantile,
    welch_halfwidth,
)

scores = pd.DataFrame(dict(encoding=["nopos"] * 3 + ["alibi"], seed=[2, 0, 1, 0], perplexity=[14.0, 10.0, 12.0, 9.0]))


def test_seed_summary_columns_groups_in_order_and_one_seed():
    summary = seed_summary(scores, "encoding", "perplexity")
    assert list(summary.columns) == ["encoding", "perplexity_mean", "perplexity_std", "n_seeds"]
    assert summary.encoding.tolist() == ["nopos", "alibi"]  # groups in order of appearance
    assert summary.perplexity_mean.tolist() == pytest.approx([12.0, 9.0])
    assert np.isnan(summary.perplexity_std[1])  # one seed: no spread to report
    assert summary.n_seeds.tolist() == [3, 1]


def test_seed_summary_and_per_seed_refuse_missing_columns_and_a_seed_twice():
    with pytest.raises(ValueError, match=re.escape("no column(s) ['L']")):
        seed_summary(scores, ["encoding", "L"], "perplexity")
    with pytest.raises(ValueError, match="appears twice"):
        seed_summary(pd.concat([scores, scores]), "encoding", "perplexity")
    with pytest.raises(ValueError, match=re.escape("no column(s) ['loss']")):
        per_seed(scores, "loss", encoding="nopos")


def test_seeds_without_a_value_are_not_counted():
    # a seed of nopos, and alibi's only seed, give no value
    partial = seed_summary(scores.assign(perplexity=[14.0, np.nan, 12.0, np.nan]), "encoding", "perplexity")
    assert partial.n_seeds.tolist() == [2, 0]  # the seeds with a value, not the rows
    assert format_mean_std(partial, "perplexity", 1).tolist() == ["13.0 ± 1.4", "n/a (0 seeds evaluable)"]


def test_half_widths_many_seeds_welch_and_draws():
    assert t_quantile(1e6) == pytest.approx(1.960, abs=1e-3)  # many: the normal's 1.96
    # equal spreads: 4 degrees of freedom
    assert welch_halfwidth(1.0, 3, 1.0, 3) == pytest.approx(t_quantile(4) * math.sqrt(2 / 3))
    assert welch_halfwidth(1.0, 3, 0.0, 3) > t_quantile(4) * math.sqrt(1 / 3)  # one side's spread alone: fewer degrees
    assert welch_halfwidth(0.0, 3, 0.0, 3) == 0.0
    assert all(math.isnan(w) for w in (welch_halfwidth(1.0, 1, 1.0, 3), paired_halfwidth([0.1]), draw_halfwidth([0.4])))
    values = [0.44, 0.54, 0.55]
    assert draw_halfwidth(values, draws=2) == pytest.approx(t_quantile(2) * np.std(values, ddof=1) * math.sqrt(2))


def test_seed_gap_far_apart_noisy_one_seed_and_empty():
    assert seed_gap([10, 11, 12], [5, 5.5, 6])["side"] == 1  # 5.5 apart, every seed the same way
    assert seed_gap([10.1, 11.4, 11.5], [10.5, 11.0, 12.5])["side"] == 0  # the seeds disagree on the sign
    assert seed_gap([2.3, 3.0, 4.1], [2.0, 3.0, 4.0])["side"] == 0  # the changes (0.3, 0, 0.1) scatter as they move
    one = seed_gap([10], [5])
    assert (one["side"], one["verdict"]) == (0, "one seed: no spread to judge")
    with pytest.raises(ValueError, match="a value per seed on both sides"):
        seed_gap([], [1])


def test_side_below_within_and_a_nan_spread():
    assert [side(-0.3, 0.2), side(0.1, 0.2), side(5.0, float("nan"))] == [-1, 0, 0]


def test_quoted_names_welch_interval_for_other_seeds():
    unpaired = seed_gap([2.1, 3.12, 4.09], [2.0, 3.0])
    assert quoted(unpaired, "nats", ".2f") == f"0.60 ± {unpaired['spread']:.2f} nats (95% t interval, Welch's)"


def test_spread_order_unknown_spread_and_format():
    summary = seed_summary(
        pd.DataFrame(
            dict(
                encoding=["a"] * 3 + ["b"] * 3 + ["c"] * 3,
                seed=[0, 1, 2] * 3,
                perplexity=[10.0, 11.0, 10.5, 10.5, 10.9, 10.7, 20.0, 21.0, 20.5],
            )
        ),
        "encoding",
        "perplexity",
    )
    one_seed_alibi = seed_summary(scores.iloc[2:], "encoding", "perplexity")
    assert spread_order(one_seed_alibi, "encoding", "perplexity") == "alibi 9 ? nopos 12"
    assert spread_order(summary, "encoding", "perplexity", fmt=".2f") == "a 10.50 ≈ b 10.70 < c 20.50"


gaps = pd.Series([0.10, 0.02], index=["small", "large"])


def test_gap_trend_on_published_numbers_claims_no_spread():
    assert gap_trend(gaps, reported=True) == "from +10.0% (small) to +2.0% (large): narrows"
    assert gap_trend(gaps[::-1], reported=True).endswith(": widens")


def test_gap_verdicts_only_the_core_setting_borrows_the_seed_spread():
    verdicts = gap_verdicts(gaps, [0.04, 0.05, 0.06], core="small")
    assert verdicts["large"].endswith("one seed, with no spread of its own setting, so it is not established.")
    assert "beyond" not in gap_verdicts(gaps, [0.04, 0.05, 0.06])["small"]  # no core setting: nothing borrows
    assert gap_verdicts(gaps, core="small")["small"].endswith("unknown, so it is not established.")
    assert "within" in gap_verdicts(gaps, [0.0, 0.1, 0.2], core="small")["small"]


x = np.array([1e6, 2e6, 4e6, 8e6])
budgets, seed_of = np.repeat([2e6, 4e6, 8e6], 3), np.tile([0, 1, 2], 3)


def test_power_law_fit_says_which_interval_and_refuses_what_it_cannot_fit():
    assert power_law_fit(x, 0.5 * (x / 1e6) ** -0.5)["interval"] == "points"
    by_seed = power_law_fit(budgets, 0.3 * (budgets / 2e6) ** np.array([-0.5, -0.6, -0.4])[seed_of], seeds=seed_of)
    assert (by_seed["interval"], by_seed["n_seeds"], by_seed["n"]) == ("seeds", 3, 9)
    for y, seeds, message in [
        ([0.3, -0.1, 0.2, 0.1], None, "positive values"),
        ([0.3, 0.2], None, "at least three"),
        ([0.3, 0.2, 0.1], [0, 1, 2], "seed 0 at 1"),
        (budgets, [0] * 9, "two seeds at least"),
        (budgets, [0, 1], "and 2 seeds"),
    ]:
        xs = x[: len(y)] if seeds is None else budgets[: len(y)]
        with pytest.raises(ValueError, match=message):
            power_law_fit(xs, y, seeds=seeds)


def test_power_law_reach_interval_ends_and_lines_that_never_reach():
    noisy = power_law_fit(x, [0.5, 0.33, 0.27, 0.17])
    central, near, far = power_law_reach(noisy, 0.01)
    assert noisy["slope_halfwidth"] > 0 and near < central < far, (near, central, far)
    flat = power_law_fit(x, [0.3, 0.2, 0.35, 0.25])  # the slope's interval holds 0: the far end is never
    assert power_law_reach(flat, 0.01)[2] == math.inf
    assert power_law_reach(power_law_fit(x, [0.1, 0.2, 0.4, 0.8]), 0.01)[0] == math.inf  # a growing gap never shrinks
