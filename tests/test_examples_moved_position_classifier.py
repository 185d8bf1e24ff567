"""The checks nbs/04c_position_classifier's examples moved out (issue 58, item 5): the chapter shows the probe, the
two guesses, the schedule and the stopping rule once each; their refusals and edge cases are checked here."""

import re

import pytest
import torch

from posenc_nb.position_classifier import (
    Plateau,
    ProbeTraining,
    Standardise,
    check_kinds,
    make_probe,
    middle_mad,
    random_mad,
)


def test_probe_kinds_are_checked():
    assert check_kinds("mlp") == ["mlp"]
    with pytest.raises(ValueError, match="no probe kinds"):
        check_kinds([])
    with pytest.raises(ValueError, match="unknown probe kind 'deep'"):
        make_probe(32, 64, "deep")


def test_standardised_features_have_mean_0():
    x = torch.randn(50, 3) * torch.tensor([1.0, 100.0, 0.0]) + 5
    torch.testing.assert_close(Standardise(x)(x).mean(0), torch.zeros(3), atol=1e-5, rtol=0)


def test_the_two_guesses_at_the_papers_length_and_ours():
    assert random_mad(1024) == pytest.approx(341.33, abs=0.01)  # the paper's baseline at L=1024
    assert middle_mad(128) == 32.0


def test_the_warmup_reaches_the_full_rate_at_its_end():
    assert ProbeTraining(epochs=2, warmup=0.1).lr_scale(9, 50) == pytest.approx(1.0, abs=1e-9)


def test_the_cap_is_40_passes_or_the_minimum():
    assert (ProbeTraining(epochs=3).max_epochs, ProbeTraining(epochs=50).max_epochs) == (40, 50)


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(epochs=0), "epochs must be a positive integer"),
        (dict(epochs=3, max_epochs=2), "max_epochs (2) is below epochs (3)"),
        (dict(lr=-1), "lr must be a number > 0"),
        (dict(warmup=1.5), "warmup"),
        (dict(patience=0), "patience must be a positive integer"),
        (dict(lr_drops=1.5), "lr_drops must be a whole number"),
        (dict(min_improvement=-0.1), "min_improvement must be a number of nats >= 0"),
    ],
)
def test_probe_training_refuses(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ProbeTraining(**settings)


def test_the_old_steps_keyword_is_refused_by_name():
    with pytest.raises(TypeError, match="steps"):
        ProbeTraining(steps=300)


def test_within_the_first_passes_the_rule_only_counts_then_acts():
    waiting = Plateau(patience=2, lr_drops=0, min_improvement=0.0)
    assert [waiting.update(3.0, act=False) for _ in range(3)] == [False] * 3
    assert waiting.update(3.0)
    assert not Plateau(1, 0, 0.0).update(5.0)  # a first check always improves on nothing
