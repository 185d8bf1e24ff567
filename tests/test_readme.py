"""The README and its pages cannot misquote the committed CSVs and executed notebooks: their generated blocks are what
they give. The README's links lead somewhere, its chapter table lists every chapter, and its Python runs as written."""

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

from posenc_nb.experiments import EXPERIMENTS
from posenc_nb.report import README, TABLES, readme_blocks, readme_files, render
from posenc_nb.files import REPO_ROOT, committed_figures

RESULTS = REPO_ROOT / "figures" / "README.md"  # the results in detail, which GitHub shows below the figures
# The README and its pages: the results in detail, the speed of training, the developer guide
PAGES = [README, RESULTS, REPO_ROOT / "figures" / "SPEED.md", REPO_ROOT / "nbs" / "DEVELOPING.md"]
CHAPTER_TABLE = "| chapter | module | what it holds |"
TABLE_ROW = re.compile(r"(?m)^\|.*\|$")


def blocks() -> dict[Path, dict[str, str]]:
    "The generated blocks of each file `update_readme` rewrites."
    return {path: readme_blocks(path.read_text()) for path in readme_files()}


def outside_blocks(text: str) -> str:
    "`text` without its generated blocks."
    return re.sub(r"<!-- generated:([\w/]+) -->\n.*?<!-- /generated:\1 -->", "", text, flags=re.S)


def test_the_readme_rewrites_its_results_page():
    "update_readme's files, by default: the README and its results page (the pages it links to that hold blocks)."
    assert readme_files() == [README, RESULTS]


def test_the_report_loads_neither_torch_nor_the_model():
    "The README's tables render from CSVs: the report and the table registry it reads stay leaves."
    code = (
        "import posenc_nb.report, sys; assert not {'torch', 'posenc_nb.model'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_results_table_and_finding_is_generated():
    """Every table the report makes and every notebook's findings have a block in the README or its results page; each
    table is one experiment's, as its entry says (but the run's minutes and claims)."""
    names = {name for found in blocks().values() for name in found}
    assert set(TABLES) <= names, set(TABLES) - names
    assert sorted([*(table for entry in EXPERIMENTS.values() for table in entry.report), "budget", "claims"]) == sorted(
        TABLES
    )
    missing = {f"findings/{name}" for name in EXPERIMENTS} - names
    assert not missing, (
        f"{sorted(missing)}: run `python -c 'import posenc_nb.report as r; r.update_readme()'` to add them"
    )
    assert "claims" in readme_blocks(README.read_text())  # the landing page shows what reproduces


def test_no_block_outside_the_files_update_readme_rewrites():
    "A block in a markdown file update_readme does not rewrite would go stale in silence."
    markdown = [
        *REPO_ROOT.glob("*.md"),
        *(p for folder in ("figures", "nbs", "tests", "data", "posenc_nb") for p in (REPO_ROOT / folder).rglob("*.md")),
    ]
    holding = {p for p in markdown if readme_blocks(p.read_text(encoding="utf-8"))}
    assert holding <= set(readme_files()), sorted(map(str, holding - set(readme_files())))


def test_committed_blocks_are_what_the_committed_files_give():
    """Each block as committed equals what the committed CSVs and executed notebooks give (posenc-reproduce rewrites
    them)."""
    for path, found in blocks().items():
        for name, body in found.items():
            assert body == render(name, committed_figures()), (
                f"{path.relative_to(REPO_ROOT)}: {name} differs from the results"
            )


def test_each_finding_is_its_own_paragraph():
    "Quoted findings one a paragraph (a bare `>` between two), or GitHub and the site run them into one."
    for path, found in blocks().items():
        for name, body in ((n, b) for n, b in found.items() if n.startswith("findings/")):
            lines = body.splitlines()
            assert lines[::2] == [line for line in lines if line.startswith("> ")] and set(lines[1::2]) <= {">"}, (
                path,
                name,
            )


def test_the_budget_totals_are_the_sum_of_the_timings():
    """A check of the generator itself, against the CSV read here: a row a notebook and a total a run (parts run apart),
    the totals adding up to the notebooks' minutes."""
    seconds = pd.read_csv(committed_figures() / "reproduce_timings.csv").seconds
    budget = next(found["budget"] for found in blocks().values() if "budget" in found)
    totals = [float(total) for total in re.findall(r"\*\*total\*\* \| ([\d.]+)", budget)]
    assert totals and abs(sum(totals) - seconds.sum() / 60) < 0.05 * len(totals), (totals, seconds.sum() / 60)
    assert len(budget.splitlines()) == 2 + len(seconds) + len(totals)  # the header, its rule, the rows, the totals


def test_no_hand_typed_results_table():
    """Outside the generated blocks, the results page holds no table, and the README none but its chapter table: a
    number there would be typed by hand."""
    results = outside_blocks(RESULTS.read_text())
    assert not TABLE_ROW.search(results), TABLE_ROW.search(results)[0]
    readme = outside_blocks(README.read_text())
    start = readme.index(CHAPTER_TABLE)
    end = readme.index("\n\n", start)
    rest = readme[:start] + readme[end:]
    assert not TABLE_ROW.search(rest), TABLE_ROW.search(rest)[0]


# what a ± may stand for, named in the sentence that quotes it
INTERVAL_NAMED = re.compile(r"\bstd\b|standard deviation|interval|half-width|\d+% seed spread", re.I)


def unnamed_spreads(text: str) -> list[str]:
    "The sentences of `text`'s prose (no tables, no code) that quote a number with a ± and do not say what the ± is."
    prose = " ".join(
        line for line in re.sub(r"```.*?```", "", text, flags=re.S).splitlines() if not line.lstrip().startswith("|")
    )
    sentences = re.split(r"(?<=[.;:])\s+(?=[A-Z(*])", prose)
    return [s for s in sentences if re.search(r"±\s*[0-9.]", s) and not INTERVAL_NAMED.search(s)]


def test_a_spread_quoted_in_prose_says_which_it_is():
    """A sentence of the README or its pages that quotes a number with a ± says what the ± is (a std over seeds, a 95%
    t interval): "+0.034 ± 0.019" read as an interval when it was a std."""
    example = "Gain +0.034 ± 0.019 nats a byte. Gain +0.03 ± 0.05 (95% t interval). Std 0.2 ± 0.1. A ± alone."
    assert unnamed_spreads(example) == ["Gain +0.034 ± 0.019 nats a byte."]
    unnamed = [(page.name, s) for page in PAGES for s in unnamed_spreads(outside_blocks(page.read_text()))]
    assert not unnamed, unnamed


def test_the_chapter_table_lists_every_chapter():
    "One row per library chapter (nbs/[0-9]*.ipynb, lettered ones too), in the order of their numbers."
    readme = README.read_text()
    table = readme[readme.index(CHAPTER_TABLE) : readme.index("\n\n", readme.index(CHAPTER_TABLE))]
    listed = re.findall(r"(?m)^\| `(\w+)` \|", table)
    chapters = sorted(p.stem for p in (REPO_ROOT / "nbs").glob("[0-9]*.ipynb"))
    assert listed == chapters, (
        f"missing {sorted(set(chapters) - set(listed))}, not a chapter {sorted(set(listed) - set(chapters))}"
    )


def github_anchor(heading: str) -> str:
    "The #fragment GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_and_its_pages_link_to_what_is_there():
    """Every relative link of the README and its pages names a file of the repository (and a heading of it, if it
    names one)."""
    assert README.is_file() and not README.is_symlink()
    readme = README.read_text()
    for page in PAGES[1:]:  # the landing page reaches each of its pages
        assert f"]({page.relative_to(REPO_ROOT).as_posix()}" in readme, page
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, fragment = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), f"{page.relative_to(REPO_ROOT)} links to {target}, which is not there"
            if fragment and linked.suffix == ".md":
                headings = re.findall(r"(?m)^#+ (.+)$", re.sub(r"(?ms)^```.*?^```", "", linked.read_text()))
                assert fragment in map(github_anchor, headings), (
                    f"{page.relative_to(REPO_ROOT)}: no #{fragment} in {path}"
                )


def test_the_two_commands_are_in_the_readme():
    "The set-up and main job, and the test command CI runs (.ci/run), as the README gives them."
    commands = re.search(r"## Two commands\n.*?```bash\n(.*?)```", README.read_text(), re.S)[1]
    assert re.search(r"(?m)^make reproduce\b", commands) and re.search(r"(?m)^make test\b", commands), commands


# Runs each block in one namespace, as a notebook or an interactive session would: a last bare expression is shown
DRIVER = """
import ast, json, sys
namespace = {"__name__": "__main__"}
for number, block in enumerate(json.load(sys.stdin), 1):
    name = f"<README python block {number}>"
    tree = ast.parse(block, name)
    shown = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, name, "exec"), namespace)
    if shown is not None:
        value = eval(compile(ast.Expression(shown.value), name, "eval"), namespace)
        table = value.to_json() if hasattr(value, "to_json") else None
        print("README value", json.dumps({"block": number, "repr": repr(value), "table": table}), flush=True)
"""


def test_the_readme_python_runs_as_written(tmp_path):
    """Every ```python block of the README, top to bottom in one Python session, as a reader would run them after
    `make test` has fetched the data: run in a scratch folder with its own runs and a copy of the data cache, so
    nothing is written into the repository. What the README says a reader will see is what they see."""
    code = re.findall(r"(?ms)^```python\n(.*?)^```$", README.read_text())
    assert len(code) >= 2, code
    shutil.copytree(REPO_ROOT / "data", tmp_path / "data", ignore=shutil.ignore_patterns("*.lock"))
    env = {
        **os.environ,
        "POSENC_RUNS_DIR": str(tmp_path / "runs"),
        "POSENC_DATA_DIR": str(tmp_path / "data"),
        "MPLBACKEND": "Agg",
    }
    done = subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps(code),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    shown = {
        v["block"]: v
        for v in (
            json.loads(line.removeprefix("README value "))
            for line in done.stdout.splitlines()
            if line.startswith("README value ")
        )
    }
    perplexity = pd.read_json(io.StringIO(shown[1]["table"])).perplexity
    assert len(perplexity) == 3 and perplexity.between(2_800, 3_000).all(), (
        perplexity
    )  # "about 2,900", as the README says
    assert "about 2,900" in README.read_text()
    assert shown[2]["repr"] == "torch.Size([1, 2, 32, 32])", shown[2]  # the shape the README's comment gives
    assert any((p / "meta.json").exists() for p in (tmp_path / "runs").iterdir()), (
        "the run is not in the scratch folder"
    )
