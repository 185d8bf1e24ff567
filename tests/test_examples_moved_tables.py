"""The checks nbs/00c_tables' examples moved out (issue 58, item 5): every table `save_table` refuses beyond a
misspelt name (a declared column missing, no rows, a value missing, an extra column asked for and not there), the
one-seed summary it allows, and a table written before a column was declared, checked here on the library."""

import numpy as np
import pandas as pd
import pytest

from posenc_nb.tables import StaleTable, read_table, save_table

gaps = pd.DataFrame(dict(arm=["core"], steps=[2000], train_bytes=[4.1e6], gap=[0.28]))


@pytest.mark.parametrize(
    "table, extra, message",
    [
        (gaps.drop(columns="gap"), (), r"lacks columns \['gap'\]"),
        (gaps.iloc[:0], (), "is empty"),
        (gaps.assign(gap=np.nan), (), r"in columns \['gap'\]"),
        (gaps, ["slope"], r"lacks columns \['slope'\]"),
    ],
)
def test_save_table_refuses(tmp_path, table, extra, message):
    with pytest.raises(ValueError, match=message):
        save_table(table, tmp_path, "gap_budget.csv", extra=extra)
    assert not (tmp_path / "gap_budget.csv").exists()


def test_a_summary_of_one_seed_may_have_no_spread(tmp_path):
    summary = pd.DataFrame(
        dict(
            encoding=["nopos"],
            variant=["trained"],
            objective=["mlm"],
            perplexity_mean=[9.0],
            perplexity_std=[np.nan],
            n_seeds=[1],
        )
    )
    assert save_table(summary, tmp_path, "mlm_control_summary.csv").exists()


def test_a_table_written_before_a_column_was_declared_is_stale(tmp_path):
    (tmp_path / "gap_budget.csv").write_text("arm,steps\ncore,2000\n")
    with pytest.raises(StaleTable, match="written before train_bytes, gap was declared"):
        read_table(tmp_path, "gap_budget.csv")
