"The README's results cannot misquote the committed CSVs and executed notebooks: its generated blocks are what they give."
import re

import pandas as pd

from posenc_nb.profiles import committed_figures
from posenc_nb.report import TABLES, readme_blocks, render
from posenc_nb.reproduce import experiment_notebooks
from posenc_nb.utils import REPO_ROOT

README = REPO_ROOT / "README.md"


def test_every_results_table_and_verdict_is_generated():
    "Every table the report makes and every notebook's verdicts have a block in the README."
    names = set(readme_blocks(README.read_text()))
    assert set(TABLES) <= names, set(TABLES) - names
    assert {f"verdicts/{nb.stem}" for nb in experiment_notebooks()} <= names


def test_committed_blocks_are_what_the_committed_files_give():
    "Each block as committed equals what the committed CSVs and executed notebooks give (posenc-reproduce rewrites them)."
    for name, body in readme_blocks(README.read_text()).items():
        assert body == render(name, committed_figures()), f"README block {name} differs from the committed results"


def test_the_budget_total_is_the_sum_of_the_timings():
    "A check of the generator itself, against the CSV read here: the total is the notebooks' minutes added up."
    seconds = pd.read_csv(committed_figures() / "reproduce_timings.csv").seconds
    budget = readme_blocks(README.read_text())["budget"]
    total = float(re.search(r"\*\*total\*\* \| ([\d.]+)", budget)[1])
    assert abs(total - seconds.sum() / 60) < 0.05 and len(budget.splitlines()) == len(seconds) + 3


def test_no_hand_typed_results_table():
    "Outside the generated blocks, the results sections hold no table: a number there would be typed by hand."
    text = README.read_text()
    results = text[text.index("## Results"):]
    outside = re.sub(r"<!-- generated:([\w/]+) -->\n.*?<!-- /generated:\1 -->", "", results, flags=re.S)
    assert not re.search(r"(?m)^\|.*\|$", outside), re.search(r"(?m)^\|.*\|$", outside)[0]
