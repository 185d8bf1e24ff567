"""End-to-end tests of `posenc-train`: the command, exact resume after SIGKILL, damaged and foreign checkpoints,
divergence, bad configs, and 2-process DDP against 1 process. Models are tiny so that the file runs in well under 3
minutes.

Reusing a finished run is checked in nbs/03e_train and not repeated here. Errors are checked by type and by the facts
their message carries (the file, the keys and values at fault, the remedy's flag), not by their wording."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from posenc_nb.checkpoint import CheckpointError, read_meta
from posenc_nb.config import TrainConfig
from posenc_nb.training_log import read_metrics
from posenc_nb.tasks import TASK_VOCAB_SIZE, task_width
from posenc_nb.train import TrainingDiverged, main, train
from support import POSENC_TRAIN, TINY, partial_run, weights, write_config

pytestmark = pytest.mark.usefixtures("runs_root")  # every run in a scratch folder


def posenc_train(*args, check=True, launcher=()) -> subprocess.CompletedProcess:
    assert POSENC_TRAIN.exists(), "install the package first: pip install -e ."
    done = subprocess.run(
        [*launcher, str(POSENC_TRAIN), *map(str, args), "--no-progress"], capture_output=True, text=True, timeout=240
    )
    if check and done.returncode:
        raise AssertionError(f"posenc-train failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def config_problems(stderr: str) -> dict[str, str]:
    "The problems `posenc-train` lists for a bad config (one `  - key: problem` line each), by key."
    return dict(re.findall(r"^\s+- (\w+): (.*)$", stderr, re.M))


def assert_same_log(a: pd.DataFrame, b: pd.DataFrame):
    "The same metrics, exactly, apart from the measured speed."
    pd.testing.assert_frame_equal(a.drop(columns="tokens_per_s"), b.drop(columns="tokens_per_s"), check_exact=True)


def test_command_trains_then_says_finished(tmp_path):
    config = write_config(tmp_path / "run.yaml", pos_encoding="alibi")
    out = tmp_path / "run"
    posenc_train("--config", config, "--out", out, "max_steps=6", "lr=2e-3")
    metrics = read_metrics(out)
    assert list(metrics.step) == [1, 2, 3, 4, 5, 6]
    assert {"step", "tokens", "train_loss", "lr", "val_loss", "tokens_per_s"} <= set(metrics.columns)
    assert metrics.dropna(subset=["val_loss"]).step.tolist() == [4, 6]
    assert metrics.tokens.iloc[-1] == 6 * TINY["batch_size"] * TINY["seq_len"]
    meta = read_meta(out)
    assert meta["finished"] and meta["config"]["lr"] == 2e-3 and meta["config"]["max_steps"] == 6

    before = snapshot(out)
    again = posenc_train("--config", config, "--out", out, "max_steps=6", "lr=2e-3")
    assert "finished training (6 steps)" in again.stdout
    assert snapshot(out) == before


def test_command_trains_a_task_and_names_a_bad_one(tmp_path):
    """A synthetic task trains through the same command; a misspelt one is named with the task it resembles, before
    anything is made."""
    out = tmp_path / "task"
    posenc_train("--out", out, *(f"{k}={v}" for k, v in {**TINY, **TASK}.items()), "max_steps=4")
    meta = read_meta(out)
    assert meta["finished"] and meta["config"]["task"] == "reverse" and meta["inputs"] == {}  # no corpus file read
    assert read_metrics(out).val_loss.notna().any()
    bad = posenc_train(
        "--out", tmp_path / "bad", *(f"{k}={v}" for k, v in {**TINY, **TASK}.items()), "task=revrese", check=False
    )
    assert bad.returncode == 2 and "'reverse'" in config_problems(bad.stderr)["task"], bad.stderr
    assert not (tmp_path / "bad").exists()


def test_overrides_anywhere_among_the_options(tmp_path, capsys):
    "key=value pairs before, between and after the options, as a shell user types them."
    out = tmp_path / "run"
    keys = [f"{key}={value}" for key, value in TINY.items()]
    assert main(["--no-progress", *keys[:4], "--out", str(out), *keys[4:], "max_steps=2", "--force"]) == 0, (
        capsys.readouterr()
    )
    meta = read_meta(out)
    assert meta["finished"] and meta["config"]["max_steps"] == 2 and meta["config"]["d_model"] == TINY["d_model"]


def test_a_finished_run_is_reused_quietly_unless_verbose(tmp_path, capsys):
    "Experiments ask with progress=False and print nothing; the command says what it reused, and where."
    cfg = TrainConfig(**{**TINY, "max_steps": 2})
    train(cfg, tmp_path / "run", progress=False)
    capsys.readouterr()
    train(cfg, tmp_path / "run", progress=False)
    assert capsys.readouterr().out == ""
    train(cfg, tmp_path / "run", progress=False, verbose=True)
    assert f"{tmp_path / 'run'}: this config finished training (2 steps)" in capsys.readouterr().out


def test_resume_after_sigkill_is_exact(tmp_path):
    config = write_config(tmp_path / "run.yaml", max_steps=60, checkpoint_interval=5, eval_interval=20, dropout=0.1)
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    posenc_train("--config", config, "--out", whole)

    proc = subprocess.Popen(
        [str(POSENC_TRAIN), "--config", str(config), "--out", str(killed), "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if (killed / "meta.json").exists():
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.002)
    assert proc.wait() == -signal.SIGKILL, "the run ended before it could be killed"
    stopped_at = read_meta(killed)["step"]
    assert 0 < stopped_at < 60

    resumed = posenc_train("--config", config, "--out", killed)
    assert f"resuming from step {stopped_at}" in resumed.stdout
    assert read_meta(killed)["finished"]
    whole_weights, killed_weights = weights(whole), weights(killed)
    assert all(torch.equal(whole_weights[k], killed_weights[k]) for k in whole_weights)
    log_whole, log_killed = read_metrics(whole), read_metrics(killed)
    assert list(log_killed.step) == list(range(1, 61))  # no duplicates, no gaps
    assert_same_log(log_killed, log_whole)


@pytest.mark.parametrize("encoding", ["nopos", "rope", "alibi"])
def test_bfloat16_trains_as_float32_does(encoding):
    """The bfloat16 path (autocast over float32 weights, optimizer state and loss) ends a short run within 0.01 nats of
    float32's losses (measured: 2e-4), and is not float32 under another name: the losses differ."""
    losses = {}
    for dtype in ("float32", "bfloat16"):
        run = train(TrainConfig(**{**TINY, "pos_encoding": encoding, "dtype": dtype}), progress=False)
        log = read_metrics(run.out_dir)
        losses[dtype] = np.array([log.train_loss.iloc[-1], log.val_loss.dropna().iloc[-1]])
    assert np.abs(losses["bfloat16"] - losses["float32"]).max() < 0.01, losses
    assert (losses["bfloat16"] != losses["float32"]).all(), losses


def test_resume_under_bfloat16_is_exact(tmp_path):
    "A bfloat16 run stopped after its checkpoint at step 3 resumes to the weights and log of one that never stopped."
    keys = dict(dtype="bfloat16", dropout=0.1)
    whole = train(TrainConfig(**{**TINY, **keys}), tmp_path / "whole", progress=False)
    cfg = partial_run(tmp_path / "stopped", steps=4, **keys)  # its last checkpoint: step 3
    assert read_meta(tmp_path / "stopped")["step"] == 3
    resumed = train(cfg, tmp_path / "stopped", progress=False)
    whole_weights, resumed_weights = weights(whole.out_dir), weights(resumed.out_dir)
    assert all(torch.equal(whole_weights[k], resumed_weights[k]) for k in whole_weights)
    assert_same_log(read_metrics(resumed.out_dir), read_metrics(whole.out_dir))


def truncate_half(path: Path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_tensorboard_events_follow_the_metrics_across_a_resume(tmp_path):
    """With tensorboard installed (the dev extra), the events (beside the run folder) hold metrics.jsonl's numbers; a
    resume drops those past its checkpoint."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    cfg = partial_run(out, steps=5)  # a checkpoint at step 3, events and metrics to step 5
    train(cfg, out, progress=False)  # resumes from step 3
    metrics, events = read_metrics(out), EventAccumulator(str(tmp_path / "tensorboard" / "run")).Reload()
    loss = events.Scalars("train_loss")
    assert [e.step for e in loss] == metrics.step.tolist() == list(range(1, TINY["max_steps"] + 1))
    assert [e.value for e in loss] == pytest.approx(metrics.train_loss.tolist(), rel=1e-6)
    assert [e.step for e in events.Scalars("val_loss")] == metrics.dropna(subset=["val_loss"]).step.tolist()


@pytest.mark.parametrize("damaged", ["meta.json", "model", "optimizer"])
def test_damaged_checkpoint_is_reported_and_left_alone(tmp_path, damaged):
    out = tmp_path / "run"
    cfg = partial_run(out)
    path = out / (damaged if damaged == "meta.json" else read_meta(out)["files"][damaged])
    truncate_half(path)
    before = snapshot(out)
    with pytest.raises(CheckpointError, match=str(path).replace(".", r"\.")) as error:
        train(cfg, out, progress=False)
    assert "--force" in str(error.value)
    assert snapshot(out) == before


def test_command_reports_damaged_checkpoint(tmp_path):
    out = tmp_path / "run"
    partial_run(out)
    name = read_meta(out)["files"]["model"]
    truncate_half(out / name)
    before = snapshot(out)
    failed = posenc_train("--config", write_config(tmp_path / "run.yaml"), "--out", out, check=False)
    assert failed.returncode == 1 and str(out / name) in failed.stderr, failed.stderr  # the file at fault
    assert snapshot(out) == before


def test_other_config_is_refused_then_force_retrains(tmp_path):
    out = tmp_path / "run"
    partial_run(out)
    before = snapshot(out)
    other = TrainConfig(**{**TINY, "pos_encoding": "rope", "seed": 1})
    with pytest.raises(CheckpointError) as error:
        train(other, out, progress=False)
    message = str(error.value)
    assert str(out) in message, message
    # each differing key with its value in the checkpoint, then its value now
    assert re.search(r"pos_encoding: 'nopos'[^;]*'rope'", message) and re.search(r"seed: 0\b[^;]*\b1\b", message), (
        message
    )
    assert "lr:" not in message, message  # only the keys that differ
    assert "--force" in message and "--out" in message, message  # both ways out
    assert snapshot(out) == before

    run = train(other, out, force=True, progress=False)
    assert run.finished and read_meta(out)["config"]["pos_encoding"] == "rope"
    assert read_metrics(out).step.tolist() == list(range(1, TINY["max_steps"] + 1))


def test_nan_loss_stops_and_keeps_last_checkpoint(tmp_path):
    out = tmp_path / "run"
    cfg = TrainConfig(**{**TINY, "lr": 1e4, "warmup_steps": 0, "grad_clip": 0.0, "checkpoint_interval": 1})
    with pytest.raises(TrainingDiverged) as error:
        train(cfg, out, progress=False)
    meta, message = read_meta(out), str(error.value)
    assert re.search(r"\b(nan|inf)\b", message), message  # the loss
    assert f"step {meta['step']}" in message and str(out) in message, message  # the checkpoint kept, and where
    assert 0 < meta["step"] < cfg.max_steps and not meta["finished"]
    assert all(torch.isfinite(w).all() for w in weights(out).values())
    assert read_metrics(out).step.max() == meta["step"]


def test_bad_config_lists_every_problem(tmp_path):
    config = write_config(
        tmp_path / "run.yaml", lrr=1e-3, batch_size="eight", dropout=1.5, grad_accum=3, seq_len=64, max_len=32
    )
    out = tmp_path / "run"
    failed = posenc_train("--config", config, "--out", out, "pos_encoding=rotary", "n_head=3", check=False)
    assert failed.returncode == 2
    problems = config_problems(failed.stderr)
    assert set(problems) == {"lrr", "batch_size", "dropout", "max_len", "pos_encoding"}, (
        failed.stderr
    )  # every key at fault
    facts = {
        "lrr": ["'lr'"],
        "batch_size": ["'eight'"],
        "dropout": ["1.5"],
        "max_len": ["32", "64"],
        "pos_encoding": ["'rotary'"],
    }  # the value at fault, and the suggestion or the limit
    for key, needed in facts.items():
        assert all(fact in problems[key] for fact in needed), (key, problems[key])
    assert not out.exists()

    odd = posenc_train(
        "--config", write_config(tmp_path / "odd.yaml", batch_size=9, grad_accum=2), "--out", out, check=False
    )
    assert odd.returncode == 2
    odd_problems = config_problems(odd.stderr)
    assert (
        list(odd_problems) == ["batch_size"] and "9" in odd_problems["batch_size"] and "2" in odd_problems["batch_size"]
    )


TASK = dict(
    task="reverse", vocab_size=TASK_VOCAB_SIZE, seq_len=task_width("reverse")
)  # a synthetic task in place of the corpus


@pytest.mark.slow
@pytest.mark.parametrize("data", [dict(objective="clm"), dict(objective="mlm"), TASK], ids=["clm", "mlm", "task"])
def test_two_gloo_processes_match_one(tmp_path, data):
    config = write_config(tmp_path / "run.yaml", **data, max_steps=6, eval_interval=3, device="cpu")
    one, two = tmp_path / "one", tmp_path / "two"
    posenc_train("--config", config, "--out", one)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    posenc_train("--config", config, "--out", two, "grad_accum=2", launcher=torchrun)  # 2 x 2 micro-batches of 2
    assert sorted(p.name for p in two.iterdir()) == sorted(p.name for p in one.iterdir())  # rank 0 alone wrote
    a, b = weights(one), weights(two)
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5
    log_one, log_two = read_metrics(one), read_metrics(two)
    assert (log_one.train_loss - log_two.train_loss).abs().max() < 1e-5
    assert (log_one.val_loss - log_two.val_loss).abs().max() < 1e-5
