"""The checks nbs/04g_counting's examples moved out (issue 58, item 5): the functions of numbers alone (the power-law
fits, the quadratic features, the words for a probe's standing, the rank correlation) checked here on the library;
the checks that need the chapter's trained models stay in its hidden cells."""

import math

import numpy as np
import pytest
import torch

from posenc_nb.counting import (
    FLOOR_LAW,
    deviation_features,
    gain_kept,
    law_curve,
    position_after,
    power_law_fits,
    rank_correlation,
)

n = np.arange(1, 65)


def test_a_pure_inverse_square_root_fits_its_own_law_exactly_with_no_floor():
    fits = power_law_fits(n, 3.0 / np.sqrt(n)).set_index("law")
    assert fits.loc["1/sqrt(n)", "rms_log_error"] == pytest.approx(0.0, abs=1e-9)
    assert fits.loc["1/n", "rms_log_error"] > 0.1 and fits.loc["flat", "rms_log_error"] > 0.1
    assert fits.loc[FLOOR_LAW, "floor"] == pytest.approx(0.0, abs=1e-9)


def test_a_floored_curve_saturates_where_it_was_made_to_and_only_the_floored_law_fits_it():
    floored = power_law_fits(n, law_curve(n, 2.0, 0.5, 0.25)).set_index("law")
    assert floored.loc[FLOOR_LAW, "saturation"] / 64 == pytest.approx(1.0, abs=0.03)  # the grid of floor/a: 2% apart
    assert floored.loc[FLOOR_LAW, "rms_log_error"] < 0.01 < floored.loc["1/sqrt(n)", "rms_log_error"]


def test_power_law_fits_need_positive_values():
    with pytest.raises(ValueError, match="positive values"):
        power_law_fits([1, 2], [1.0, 0.0])


def test_deviation_features_are_standardised_by_the_reference_and_hold_every_product_of_two():
    torch.manual_seed(0)
    deviation = torch.rand(16, 32) + 0.5
    features = deviation_features(deviation[None], deviation[None])
    assert features.shape == (16, 32, 2)  # z, z^2
    assert features[..., 0].mean().item() == pytest.approx(0.0, abs=1e-4)
    assert deviation_features(torch.rand(2, 3, 4), torch.rand(2, 5, 4)).shape == (3, 4, 5)  # z1, z2, z1^2, z1 z2, z2^2


def test_position_after_an_intervention_in_words():
    assert position_after(17.6, 24.8, middle=32.0) == (
        "position stays readable there: the probe keeps 50% of its gain over the middle guess"
    )
    assert position_after(17.6, 32.0, middle=32.0).startswith("position is lost there")
    assert position_after(32.0, 17.6, middle=32.0).startswith("the probe read no position there to begin with")


def test_no_gain_over_the_middle_guess_has_no_share_kept():
    assert gain_kept(32.0, 31.9, middle=32.0) == "n/a (no gain over the middle)"


def test_rank_correlation_is_spearmans_and_undefined_without_variation():
    assert rank_correlation([1, 2, 3], [30, 20, 10]) == -1.0
    assert rank_correlation([1, 2, 2, 3], [1, 2, 2, 3]) == 1.0
    assert math.isnan(rank_correlation([1, 1, 1], [3, 2, 1]))
