"""The checks nbs/05e_controls' examples moved out (issue 58, item 5): each control's other failures (one seed, a
position washed out, one permutation shrugged off), their refusals, a failed control that gates or does not, and the
findings a notebook records of them, checked here on the library; the checks on the chapter's trained models stay in
its hidden cells."""

import pytest

from posenc_nb.claims import Finding, Findings
from posenc_nb.controls import (
    context_control,
    degrades_control,
    gate,
    invariance_control,
    order_use_control,
    positions_control,
    positive_arm_control,
)
from support import SAMPLE_CLAIM

claim = SAMPLE_CLAIM
passing = positive_arm_control([1.18, 1.22, 1.20], probe_mad=2.8, middle_mad=32.0)


def test_the_positive_arm_fails_a_position_washed_out_and_refuses_no_permutation():
    assert not positive_arm_control([1.2], 9.0, 32.0).passed  # position washed out by the last layer
    with pytest.raises(ValueError, match="at least one permutation"):
        positive_arm_control([], 2.8, 32.0)


def test_a_gated_claim_names_the_control_and_keeps_its_numbers():
    failing = positive_arm_control([0.002], 30.0, 32.0)
    gated = gate([claim], failing)[0]
    assert failing.name in gated.details and "NoPos 8.6" in gated.details


learned_uses = context_control([0.031, 0.035, 0.029], 32, 128, "the learned model")


def test_context_control_one_seed_and_no_seed():
    assert learned_uses.passed
    assert not context_control([0.05], 32, 128).passed  # one seed: no spread to judge by
    with pytest.raises(ValueError, match="at least one seed"):
        context_control([], 32, 128)


def test_a_control_whose_reference_fails_says_it_gates_nothing():
    learned_flat = context_control([-0.001, 0.009, -0.012], 32, 128, "the learned model")
    blind = context_control([-0.023, -0.010, -0.036], 32, 128, reference=learned_flat)
    assert str(blind).endswith("so it gates nothing: it shows what this scale allows.")


def test_a_control_whose_reference_passes_gates_the_claims():
    early = context_control([-0.057, -0.079, -0.061], 32, 128, reference=learned_uses)
    assert (early.passed, early.gates) == (False, True)  # the learned model passes the same control
    assert gate([claim], passing, early)[0].details.split(" (measured")[0] == f"not tested: {early.name} fails"
    using = context_control([0.02, 0.03, 0.025], 32, 128, reference=learned_uses)
    assert gate([claim], passing, using) == [claim]


def test_the_modern_positions_controls_on_one_seed_and_no_seed():
    assert not positions_control([1.65], [1.80], 128).passed  # one seed
    assert not degrades_control([2.1], 1024, 128).passed  # one seed
    with pytest.raises(ValueError, match="at least one seed"):
        degrades_control([], 1024, 128)


def test_order_use_one_seed_alone_or_only_one_seed():
    # one seed alone pays: the cost is not beyond the spread
    assert not order_use_control("sinusoidal", "positions permuted", [4.0, 4.1, 3.9], [9.0, 4.1, 3.9]).passed
    assert not order_use_control("learned", "positions permuted", [4.0], [6.0]).passed  # no spread to be beyond


def test_findings_hold_each_control_as_a_finding():
    uses = order_use_control("learned", "positions permuted", [4.0, 4.1, 3.9], [6.0, 6.3, 5.7])
    blind = invariance_control([2e-5, -0.02, 0.0])
    found = Findings()
    found.add_controls(uses, blind)
    assert found == [Finding.of(uses), Finding.of(blind)]
