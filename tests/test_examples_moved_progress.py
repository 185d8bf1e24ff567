"""The checks nbs/06a_progress's examples moved out (issue 58, item 5) that need no tracker: what a run folder shows,
the estimate's edge cases, the clock, and the timings file across profiles and damage."""

import json
import os

import pandas as pd
import pytest

from posenc_nb.progress import clock, record_timings, remaining_seconds, run_state
from posenc_nb.scores import PROBES_FILE, SCORES_FILE


@pytest.fixture
def folder(tmp_path):
    "A run folder whose log reaches step 100,000."
    folder = tmp_path / "learned-clm-0000000001"
    folder.mkdir()
    lines = "".join(json.dumps(dict(step=s, train_loss=4.0)) + "\n" for s in range(1, 100_001))
    (folder / "metrics.jsonl").write_text(lines)
    return folder


def test_a_long_log_is_read_from_its_tail(folder):
    assert run_state(folder)["step"] == 100_000  # the tail only: as cheap as at step 1


def test_a_finished_run_with_a_probe_kept_was_scored(folder):
    (folder / "meta.json").write_text(json.dumps(dict(step=100_000, finished=True)))
    (folder / PROBES_FILE).write_text("{}\n")  # a probe kept: the run was measured
    state = run_state(folder)
    assert (state["step"], state["finished"]) == (100_000, True)
    assert state["scored"] > 0
    os.utime(folder / PROBES_FILE, (1, 1))
    (folder / SCORES_FILE).write_text("{}\n")
    assert run_state(folder)["scored"] == (folder / SCORES_FILE).stat().st_mtime  # the latest of the two


def test_the_plan_stands_at_start_up_and_nothing_left_is_nothing():
    assert remaining_seconds(left=900, done=10, elapsed=300) == 900  # 1% done
    assert remaining_seconds(left=0, done=100, elapsed=300) == 0


def test_the_clock_reads_hours_minutes_seconds():
    assert clock(3 * 3600 + 4 * 60 + 12.7) == "3:04:12"


def added(profile, seconds):
    return pd.DataFrame([dict(notebook="00_added", seconds=seconds, profile=profile, train_jobs=1)])


@pytest.fixture
def timings_file(tmp_path):
    path = tmp_path / "timings.csv"
    pd.DataFrame([dict(notebook="01_toy", seconds=1.0, profile="smoke", train_jobs=1)]).to_csv(path, index=False)
    record_timings(added("smoke", 3.0), path, whole=False)
    return path


def test_another_profiles_run_is_not_joined_unless_it_begins_anew(timings_file):
    record_timings(added("cpu", 9.0), timings_file, whole=False)
    assert pd.read_csv(timings_file).set_index("notebook").seconds["00_added"] == 3.0
    record_timings(added("cpu", 9.0), timings_file, whole=False, begins=True)
    assert pd.read_csv(timings_file)[["notebook", "profile"]].values.tolist() == [["00_added", "cpu"]]


@pytest.mark.parametrize("damage", [b"\xff\xfe\x00", b"", b"notebook,seconds\n01_toy,1.0\n"])
def test_a_damaged_timings_file_is_set_aside_and_this_runs_times_recorded(timings_file, damage):
    timings_file.write_bytes(damage)  # binary, empty, without its profile
    said = []
    record_timings(added("smoke", 2.0), timings_file, whole=False, log=said.append)
    assert pd.read_csv(timings_file).notebook.tolist() == ["00_added"]
    assert timings_file.with_name("timings.damaged.csv").read_bytes() == damage
    assert said[0].startswith(f"{timings_file} ") and "set aside as timings.damaged.csv" in said[0], said
