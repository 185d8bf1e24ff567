"""`posenc-reproduce`'s progress (`posenc_nb.progress`) as a log file gets it: plain lines on stderr, nothing in the
notebooks."""

import os
import re
import subprocess
import sys

import nbformat
import pytest

from posenc_nb.reproduce import EXPERIMENTS_DIR
from posenc_nb.files import REPO_ROOT

CLI = [sys.executable, "-c", "import sys; from posenc_nb.reproduce import main; sys.exit(main())"]


@pytest.mark.slow
def test_a_log_file_gets_a_plain_line_per_event_and_the_executed_copy_none(tmp_path):
    """stderr not a terminal (a pipe): a plain line per event, no carriage return; the cost first on stdout; the
    executed copy holds none of it, and shows the output folder as given, not the staging folder it was written
    into."""
    runs, out = tmp_path / "runs", tmp_path / "figures"  # an empty runs folder: the notebook trains its two models
    done = subprocess.run(
        [*CLI, "--profile", "smoke", "--only", "02_attention_heatmaps", "--out", str(out)],
        cwd=REPO_ROOT,
        env=dict(os.environ, POSENC_RUNS_DIR=str(runs)),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout.splitlines()
    assert said[1].startswith("profile 'smoke': 2 training runs") and re.match(
        r"here, on (the CPU|a GPU).*: 2 of these runs "
        r"to train \(0 finished, reused\)",
        said[2],
    ), said
    assert "\r" not in done.stderr and "\x1b" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("[1/1] 02_attention_heatmaps: begun; 0/2 models trained, 0 scored; 0:00:0"), lines
    assert all(line.startswith("[1/1] 02_attention_heatmaps: ") and " elapsed, " in line for line in lines), lines
    trained = sorted(d.name for d in runs.iterdir() if (d / "meta.json").exists())
    assert len(trained) == 2 and sorted(re.findall(r": trained (\S+);", done.stderr)) == trained, (trained, lines)
    assert lines[-1].endswith("no training left") and " 2/2 models trained" in lines[-1], lines

    text = (out / "notebooks" / "02_attention_heatmaps.ipynb").read_text()
    executed = nbformat.reads(text, as_version=4)
    shown = "".join(
        o.get("text", "") + str(o.get("data", "")) for c in executed.cells if c.cell_type == "code" for o in c.outputs
    )
    assert (
        "models trained" not in shown and " elapsed, " not in shown and "\r" not in shown
    )  # the progress stays off it
    injected = next(c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert f'out_dir = "{os.path.relpath(out, EXPERIMENTS_DIR)}"' in injected.source.splitlines(), injected.source
    assert ".staging" not in text and executed.metadata.papermill.parameters.out_dir == os.path.relpath(
        out, EXPERIMENTS_DIR
    )
