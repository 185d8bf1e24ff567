"""The check nbs/04e_attention's examples moved out (issue 58, item 5) that needs no model: an order that is no
permutation is refused. Those on the chapter's models stay in its hidden cells."""

import pytest

from posenc_nb.attention import shuffle_words


def test_an_order_that_is_no_permutation_is_refused():
    with pytest.raises(ValueError, match="is not a permutation"):
        shuffle_words("The cat sat on the mat", [0, 0, 1, 2, 3, 4])
