"""The checks nbs/07_explore's examples moved out (issue 58, item 5) that need no trained run: the word orders and
when widgets are shown. Those that need the chapter's runs stay in its hidden cells."""

import pytest

from posenc_nb.explore import has_frontend, shuffle_order


def test_two_words_have_one_other_order_and_one_word_none():
    assert all(shuffle_order("a b", seed) == [1, 0] for seed in range(10))
    assert shuffle_order("alone") == [0]


def test_an_empty_text_has_no_order():
    with pytest.raises(ValueError, match="text is empty"):
        shuffle_order("  ")


class FakeKernelShell:
    kernel = object()


def test_widgets_need_a_kernel_and_a_live_session():
    assert has_frontend(FakeKernelShell(), {}) is False
    assert has_frontend(object(), {"JPY_SESSION_NAME": "x"}) is False
