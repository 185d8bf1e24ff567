"""The checks moved out of the examples of small chapters (issue 58, item 5): 00a_validation's rules, 02c_tasks'
vocabulary and refusals, 04h_ngrams' orders and add-k refusals, 02_published_corpora's held-out splits. Each chapter
shows a rule once; every value it refuses is checked here, on the library."""

import numpy as np
import pytest

from posenc_nb.ngrams import addk_log_probs, ngram_name, ngram_orders
from posenc_nb.published_corpora import columns_by_split, holdout_split
from posenc_nb.tasks import TASK_VOCAB_SIZE, task_examples, task_problem, task_width
from posenc_nb.validation import (
    choice_problem,
    closest,
    fraction_problem,
    non_negative_problem,
    positive_int,
    positive_int_problem,
    positive_number_problem,
    seed_problem,
)
from support import refused


# --- 00a_validation ---------------------------------------------------------------------------------------------------
def test_the_closest_name():
    assert closest("lrr", ["lr", "min_lr"]) == "lr"


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "3"])
def test_a_positive_integer_is_neither_zero_nor_a_float_nor_a_bool_nor_a_string(bad):
    assert positive_int_problem(bad) == f"must be a positive integer, got {bad!r}"
    with refused(f"n_layers must be a positive integer, got {bad!r}"):
        positive_int(bad, "n_layers")


def test_positive_int_gives_a_plain_int():
    assert positive_int(np.int64(3), "n") == 3


def test_non_negative_refuses_nan():
    assert (non_negative_problem(0), non_negative_problem(-1), non_negative_problem(float("nan"))) == (
        None,
        "must be >= 0, got -1",
        "must be >= 0, got nan",
    )


def test_seeds_are_the_integers_torch_takes():
    assert [seed_problem(v) for v in (0, 2**64 - 1, np.uint64(7))] == [None] * 3
    for bad in (-1, 2**64, 1.0, True):
        assert seed_problem(bad) == f"must be an integer in [0, 2**64), the seeds torch takes, got {bad!r}"


def test_positive_numbers_and_fractions():
    assert [positive_number_problem(v) for v in (1, 1.5, 0, float("inf"), True)] == [
        None,
        None,
        "must be a positive number, got 0",
        "must be a positive number, got inf",
        "must be a positive number, got True",
    ]
    assert [fraction_problem(v) for v in (0, 0.5, 1.0, "0.1")] == [
        None,
        None,
        "must lie in [0, 1), got 1.0",
        "must lie in [0, 1), got '0.1'",
    ]


def test_a_choice_of_a_mapping_or_of_any_value():
    assert choice_problem("rope", {"rope": 1, "alibi": 2}) is None
    assert choice_problem([1], ["rope"]) == "must be one of rope, got [1]"  # any value, hashable or not


# --- 02c_tasks --------------------------------------------------------------------------------------------------------
def test_the_task_vocabulary_and_a_known_task():
    assert TASK_VOCAB_SIZE == 70
    assert task_problem("copy") is None


def test_a_tasks_width_holds_its_longest_example():
    assert task_width("replace") == 5 + 20 + 1 + 20 + 1 - 1


def test_examples_are_a_function_of_the_seed():
    assert np.array_equal(task_examples("copy", 8, seed=1)[0], task_examples("copy", 8, seed=1)[0])


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (("copy", 2, 0), dict(lengths=[20], width=10), "task_width"),
        (("nosuch", 2, 0), {}, "task must be one of repeat, replace, copy, reverse, got 'nosuch'"),
        (("copy", 2, 0, []), {}, "lengths must not be empty, got []"),
        (("copy", 2, 0, [3, 0]), {}, "lengths each entry must be a positive"),
        (("copy", 2, -1), {}, "seed must be an integer in [0, 2**64)"),
        (("copy", 0, 0), {}, "count must be a positive integer"),
    ],
)
def test_task_examples_refuse(args, kwargs, message):
    with refused(message):
        task_examples(*args, **kwargs)


# --- 04h_ngrams -------------------------------------------------------------------------------------------------------
def test_orders_up_to_what_the_vocabulary_allows_and_their_names():
    assert ngram_orders(259) == [1, 2, 3, 4, 5]
    assert (ngram_orders(50_304), ngram_name(2), ngram_name(5)) == ([1, 2, 3, 4], "bigram", "5-gram")


def test_add_k_scores_every_token_after_its_history():
    toy = np.array([0, 1] * 50)
    assert len(addk_log_probs(toy, np.arange(2).repeat(5), 3, vocab_size=2, k=1.0)) == 10 - 2


@pytest.mark.parametrize(
    "eval_tokens, order, vocab_size, message",
    [([0, 2], 2, 2, "outside a vocabulary of 2"), ([0, 1], 0, 2, "at least 1"), ([0, 1], 9, 259, "at most 7")],
)
def test_add_k_refuses(eval_tokens, order, vocab_size, message):
    with refused(message):
        addk_log_probs(np.array([0, 1] * 50), eval_tokens, order, vocab_size=vocab_size, k=1.0)


# --- 02_published_corpora ---------------------------------------------------------------------------------------------
def test_the_held_out_splits_of_few_documents():
    assert holdout_split(3) == ["train", "validation", "test"]
    assert holdout_split(8)[-2:] == ["validation", "test"]
    with refused("at least 3 documents"):
        holdout_split(2)


def test_columns_by_split():
    columns = columns_by_split([("a", "x"), ("b", "y"), ("c", "z")], holdout_split(3))
    assert columns["test"] == {"id": ["c"], "text": ["z"]}
