"""Failure modes, class by class: bad input to the commands (paths that cannot be used among it), damaged run files,
damaged data caches and JSON Lines corpora, interrupted and failed writes (a full disk, Ctrl-C while a command loads,
while it trains or while a notebook runs, what a kill -9 leaves), two trainings into one folder, and misuse of the
library.

Each test asserts the exit status or the exception type, the facts the message carries (the file, the key, the remedy),
and that no file was lost or changed. The commands run in-process through their `main`, which is what the console
scripts call (through `posenc_nb.commands`), except where a second process is the point. Models are tiny, so the module
runs in a few minutes."""

import errno
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import torch
from papermill.iorw import LocalHandler

import posenc_nb.train
from posenc_nb import bench, evaluate, plan, reproduce, step_speed, tokens
from posenc_nb.claims import Claim, read_claims, read_findings, save_claims, write_claims_table
from posenc_nb.checkpoint import CheckpointError, load_run, read_meta, run_dir, save_checkpoint
from posenc_nb.config import ConfigError, TrainConfig, config_hash
from posenc_nb.corpora import corpus_summary
from posenc_nb.evaluate import perplexity_by_length
from posenc_nb.training_log import read_metrics
from posenc_nb.model import ModelConfig, TransformerLM
from posenc_nb.probe import probe_layers, probe_windows
from posenc_nb.parameters import PROFILES, enforce_parameter_rules
from posenc_nb.scores import run_perplexity, run_probes
from posenc_nb.tasks import exact_match, task_examples
from posenc_nb.tokens import load_tokens, tokens_path
from posenc_nb.train import Trainer, TrainingInterrupted, drope, train
from posenc_nb.workers import usable_jobs
from support import POSENC_TRAIN, TINY, partial_run, weights, write_config

pytestmark = pytest.mark.usefixtures("runs_root")  # every run in a scratch folder


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict:
    "The weights of the TINY run trained start to finish without incident (on one thread, as every test trains)."
    out, threads = tmp_path_factory.mktemp("uninterrupted") / "run", torch.get_num_threads()
    torch.set_num_threads(1)
    train(TrainConfig(**TINY), out, progress=False)
    torch.set_num_threads(threads)
    return weights(out)


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` and its bytes, but lock files, which are empty and only ever created, and the record a
    cut reproduction leaves for the same command to go on (`.posenc-reproduce.run.json`)."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.suffix != ".lock" and p.name != ".posenc-reproduce.run.json"
    }


def command(main, args, capsys) -> tuple[int, str]:
    "Run a command's `main`: its exit status and stderr, which must hold a message and no traceback."
    capsys.readouterr()
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert code == 0 or err.strip(), "a failing command must say why"
    return code, err


def posenc_train(args, capsys) -> tuple[int, str]:
    return command(posenc_nb.train.main, [*args, "--no-progress"], capsys)


def flip_middle(path: Path):
    "Overwrite four bytes in the middle of `path`: the file still parses, its numbers are wrong."
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 4] = b"\xff\xff\xff\xff"
    path.write_bytes(bytes(data))


def write_documents(folder: Path, n: int = 5, lines: int = 30) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"doc{i}.txt").write_text(
            "".join(f"Line {j} of document {i}: the quick brown fox.\n" for j in range(lines))
        )
    return folder


# --- bad input: exit status 2, nothing created ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "override, facts",
    [
        ("corpus=no-such-corpus", ["'no-such-corpus'", "shakespeare"]),  # the name, and the ones that exist
        ("vocab_size=100", ["vocab_size", "100"]),
        ("grad_accum=0", ["grad_accum"]),
        ("lr=.inf", ["lr", "inf"]),
        ("learning_rate=1e-3", ["learning_rate", "'lr'"]),
        ("seq_len=200000", ["seq_len", "200000", "validation"]),  # longer than the corpus' validation split
        ("device=cuda:7", ["device", "cuda:7", "device=cpu"]),
    ],
)
def test_bad_input_to_posenc_train(tmp_path, capsys, override, facts):
    if override.startswith("device") and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    out = tmp_path / "run"
    code, err = posenc_train(["--config", write_config(tmp_path / "tiny.yaml"), "--out", out, override], capsys)
    assert code == 2, err
    assert all(fact in err for fact in facts), err
    assert not out.exists()  # a failed start leaves no run folder


def test_bad_config_file_and_bad_out_folder(tmp_path, capsys, monkeypatch):
    config = tmp_path / "bad.yaml"
    config.write_bytes(b"lr: \xff\n")  # not UTF-8
    code, err = posenc_train(["--config", config, "--out", tmp_path / "run"], capsys)
    assert code == 2 and str(config) in err, err

    work = tmp_path / "work"  # a folder of other things, e.g. a source tree, given as --out . or --out ''
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    monkeypatch.chdir(work)
    for out in (".", ""):
        code, err = posenc_train(["--config", write_config(tmp_path / "tiny.yaml"), "--out", out], capsys)
        assert code == 2 and "notes.txt" in err and "--out" in err, err
    assert snapshot(work) == {"notes.txt": b"mine"}


def test_bad_input_to_the_other_commands(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("POSENC_DATA_DIR", str(tmp_path / "data"))
    code, err = command(tokens.main, ["fetch", "--corpus", "no-such-corpus", "--quiet"], capsys)
    assert code == 2 and "'no-such-corpus'" in err, err
    code, err = command(reproduce.main, ["--profile", "smoke", "seeds=[]", "--out", tmp_path / "figs"], capsys)
    assert code == 2 and "seeds" in err, err
    assert not (tmp_path / "figs").exists()


def test_paths_that_cannot_be_used_are_bad_input(tmp_path, capsys, monkeypatch):
    """A file where a folder goes (or on the way to it), a folder where a file goes, an empty notebook folder, a missing
    tokenizer file. Before: exit status 1 with the OS's words ("File exists", "Is a directory") and no remedy."""
    a_file, empty = tmp_path / "notes.txt", tmp_path / "empty"
    a_file.write_text("mine")
    empty.mkdir()
    config = write_config(tmp_path / "tiny.yaml")
    cases = [
        (
            posenc_nb.train.main,
            ["--config", config, "--out", a_file / "run", "--no-progress"],
            {},
            [f"{a_file} is a file", "--out"],
        ),
        (
            posenc_nb.train.main,
            ["--config", config, "--no-progress"],
            {"POSENC_RUNS_DIR": a_file},
            [f"POSENC_RUNS_DIR={a_file} is a file"],
        ),
        (
            posenc_nb.train.main,
            ["--config", config, "--out", tmp_path / "run", "--no-progress"],
            {"POSENC_DATA_DIR": a_file},
            [f"POSENC_DATA_DIR={a_file} is a file"],
        ),
        (
            posenc_nb.train.main,
            ["--config", config, "--out", tmp_path / "run", f"tokenizer={tmp_path / 'no.json'}", "--no-progress"],
            {},
            [f"{tmp_path / 'no.json'} does not exist", "tokenizer"],
        ),
        (reproduce.main, ["--profile", "smoke", "--out", a_file / "figs"], {}, [f"{a_file} is a file", "--out"]),
        (
            reproduce.main,
            ["--profile", "smoke", "--out", tmp_path / "figs", "--experiments-dir", empty],
            {},
            [f"No experiment notebooks (*.ipynb) in {empty}", "--experiments-dir"],
        ),
        (plan.plan_main, ["--profile", "smoke", "--out", empty], {}, [f"{empty} is a folder", "--out plan.sh"]),
    ]
    for main, args, env, facts in cases:
        with monkeypatch.context() as variables:
            for name, value in env.items():
                variables.setenv(name, str(value))
            code, err = command(main, args, capsys)
        assert code == 2 and all(fact in err for fact in facts), err
    assert snapshot(tmp_path) == {
        "notes.txt": b"mine",
        "tiny.yaml": config.read_bytes(),
    }  # nothing made, nothing changed


@pytest.mark.parametrize("rate", ["-5", "nan", "0", "inf"])
def test_a_rate_that_gives_no_estimate_is_bad_input(tmp_path, capsys, rate):
    """Before: `plan --tflops -5` (or nan) printed negative (or NaN) GPU-hours into the script; 0 was an unexpected
    ZeroDivisionError."""
    code, err = command(plan.plan_main, ["--profile", "smoke", "--tflops", rate, "--out", tmp_path / "plan.sh"], capsys)
    assert code == 2 and f"--tflops: {float(rate)!r} TFLOP/s per GPU gives no estimate" in err and "e.g. 150" in err, (
        err
    )
    assert not list(tmp_path.iterdir())  # no script written


def test_paths_the_os_refuses_name_the_setting_and_leave_nothing(tmp_path, capsys, monkeypatch):
    """A folder under /proc, a name with a byte that is not UTF-8. Before: "[Errno 2] No such file or directory"
    (exit 1) or the codec's words, naming no setting; a non-UTF-8 --out left its .lock and a TensorBoard folder
    behind."""
    config, not_utf8 = write_config(tmp_path / "tiny.yaml"), tmp_path / os.fsdecode(b"bad\xffname")
    train_args = ["--config", config, "--no-progress"]
    cases = [
        (posenc_nb.train.main, [*train_args, "--out", "/proc/run"], {}, ["out: /proc/run cannot hold a run", "/proc"]),
        (posenc_nb.train.main, [*train_args, "--out", not_utf8], {}, ["out: ", "not UTF-8", "bad\\xffname')"]),
        (
            posenc_nb.train.main,
            train_args,
            {"POSENC_RUNS_DIR": "/proc/runs"},
            ["set POSENC_RUNS_DIR to a folder you can write"],
        ),
        (
            reproduce.main,
            ["--profile", "smoke", "--only", "01", "--out", "/proc/figs"],
            {},
            ["out: /proc/figs cannot hold"],
        ),
        (reproduce.main, ["--profile", "smoke", "--only", "01", "--out", not_utf8], {}, ["out: ", "not UTF-8"]),
        (
            plan.plan_main,
            ["--profile", "smoke", "--out", "/proc/plan.sh"],
            {},
            ["--out: /proc/plan.sh cannot be written"],
        ),
    ]
    for main, args, env, facts in cases:
        with monkeypatch.context() as variables:
            for name, value in env.items():
                variables.setenv(name, value)
            code, err = command(main, args, capsys)
        assert code == 2 and all(fact in err for fact in facts), err
    assert sorted(os.listdir(tmp_path)) == ["tiny.yaml"]  # no lock file, no folder, no TensorBoard log


@pytest.mark.parametrize("main", [posenc_nb.train.main, reproduce.main, tokens.main])
def test_help_documents_the_exit_codes(capsys, main):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the epilog
    assert all(re.search(rf"\b{code}\b", text) for code in (0, 1, 2, 130)) and "POSENC_DEBUG" in text, text


def test_debug_variable_shows_the_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("POSENC_DEBUG", "1")
    with pytest.raises(ValueError, match="no-such-corpus"):
        posenc_nb.train.main(
            [
                "--config",
                str(write_config(tmp_path / "tiny.yaml")),
                "--out",
                str(tmp_path / "run"),
                "corpus=no-such-corpus",
            ]
        )


# --- damaged run files: exit status 1, nothing changed -------------------------------------------------------------


def test_changed_weights_of_a_finished_run_are_caught(tmp_path, capsys):
    "Four bytes overwritten mid-file used to load as a NaN weight, reused without a word."
    out = tmp_path / "run"
    cfg = TrainConfig(**TINY)
    train(cfg, out, progress=False)
    model_file = out / read_meta(out)["files"]["model"]
    flip_middle(model_file)
    before = snapshot(out)
    for reuse in (lambda: train(cfg, out, progress=False), lambda: load_run(out)):
        with pytest.raises(CheckpointError) as error:
            reuse()
        assert str(model_file) in str(error.value) and "sha256" in str(error.value), error.value
    code, err = posenc_train(["--config", write_config(tmp_path / "tiny.yaml"), "--out", out], capsys)
    assert code == 1 and str(model_file) in err and "--force" in err, err
    assert snapshot(out) == before


def test_changed_optimizer_state_stops_the_resume(tmp_path):
    out = tmp_path / "run"
    cfg = partial_run(out)
    optimizer_file = out / read_meta(out)["files"]["optimizer"]
    flip_middle(optimizer_file)
    before = snapshot(out)
    with pytest.raises(CheckpointError, match=re.escape(str(optimizer_file))):
        train(cfg, out, progress=False)
    assert snapshot(out) == before


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda meta: dict(meta, step="ten"), "step"),
        (lambda meta: dict(meta, finished="yes"), "finished"),
        (lambda meta: dict(meta, files=dict(meta["files"], model="../elsewhere/model.safetensors")), "files.model"),
        (lambda meta: {k: v for k, v in meta.items() if k != "config"}, "config"),
        (lambda meta: [meta], "mapping"),
    ],
)
def test_hand_edited_meta_is_refused(tmp_path, edit, key):
    out, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    cfg = TrainConfig(**TINY)
    train(cfg, out, progress=False)
    elsewhere.mkdir()  # a copy of the weights outside the run folder: a record naming it must not be followed
    shutil.copy(out / read_meta(out)["files"]["model"], elsewhere / "model.safetensors")
    meta_path = out / "meta.json"
    meta_path.write_text(json.dumps(edit(json.loads(meta_path.read_text()))))
    before = snapshot(tmp_path)
    for use in (lambda: train(cfg, out, progress=False), lambda: load_run(out)):
        with pytest.raises(CheckpointError) as error:
            use()
        assert str(meta_path) in str(error.value) and key in str(error.value), error.value
    assert snapshot(tmp_path) == before


def test_changed_input_file_is_refused_for_reuse_scoring_and_resume(tmp_path, capsys, monkeypatch):
    "A run trained with tokenizer=PATH used to be reused, scored and resumed after the file at PATH changed."
    monkeypatch.setenv("POSENC_DATA_DIR", str(tmp_path / "data"))
    docs = write_documents(tmp_path / "docs", n=5, lines=200)
    tokenizer, other = tmp_path / "tokenizer.json", tmp_path / "other.json"
    for vocab_size, path in ((300, tokenizer), (290, other)):  # two tokenizers of the corpus, made as its caches
        tokens.load_tokenizer(str(docs), vocab_size)
        shutil.copy(tokens.tokenizer_path(str(docs), vocab_size), path)
    cfg = TrainConfig(**{**TINY, "corpus": str(docs), "vocab_size": 300, "tokenizer": str(tokenizer)})
    finished, stopped = tmp_path / "finished", tmp_path / "stopped"
    train(cfg, finished, progress=False)
    trainer = Trainer(cfg, stopped, progress=False)
    trainer.fit(6)
    trainer.close()
    assert set(read_meta(finished)["inputs"]) == {"tokenizer", "train", "validation"}
    shutil.copy(other, tokenizer)  # another tokenisation at the same path
    before = snapshot(tmp_path / "finished") | snapshot(tmp_path / "stopped")
    uses = [
        lambda: train(cfg, finished, progress=False),
        lambda: load_run(finished),
        lambda: train(cfg, stopped, progress=False),
    ]
    for use in uses:
        with pytest.raises(CheckpointError) as error:
            use()
        assert str(tokenizer) in str(error.value) and "changed" in str(error.value) and "--force" in str(error.value), (
            error.value
        )
    code, err = posenc_train(
        [
            "--config",
            write_config(tmp_path / "tiny.yaml"),
            "--out",
            stopped,
            f"corpus={docs}",
            "vocab_size=300",
            f"tokenizer={tokenizer}",
        ],
        capsys,
    )
    assert code == 1 and str(tokenizer) in err and "Restore" in err, err
    assert snapshot(tmp_path / "finished") | snapshot(tmp_path / "stopped") == before

    shutil.copy(tokens.tokenizer_path(str(docs), 300), tokenizer)  # restored: the stopped run resumes
    stored = tokens.tokens_path(str(docs), "train", 300, tokenizer)
    stored.write_bytes(stored.read_bytes())  # rewritten, same bytes: still the run's input
    assert train(cfg, stopped, progress=False).finished
    flip_middle(tokens.tokens_path(str(docs), "validation", 300, tokenizer))
    with pytest.raises(CheckpointError, match="validation tokens"):
        load_run(finished)


def test_edited_corpus_is_refused_for_reuse_and_scoring(tmp_path, monkeypatch):
    "A local corpus edited after training names a new token cache, made from the edited text: not the run's tokens."
    monkeypatch.setenv("POSENC_DATA_DIR", str(tmp_path / "data"))
    docs = write_documents(tmp_path / "docs", n=5, lines=200)
    cfg = TrainConfig(**{**TINY, "corpus": str(docs), "vocab_size": 259})
    out = tmp_path / "run"
    train(cfg, out, progress=False)
    for split in ("train", "validation"):  # a cache deleted and made again from the same corpus is the run's input
        tokens_path(str(docs), split, 259).unlink()
    assert load_run(out).finished
    edited = docs / "doc0.txt"
    edited.write_text(edited.read_text().replace("quick", "slow"))
    before = snapshot(out)
    for use in (lambda: train(cfg, out, progress=False), lambda: load_run(out)):
        with pytest.raises(CheckpointError) as error:
            use()
        assert "tokens" in str(error.value) and "changed" in str(error.value) and "corpus" in str(error.value), (
            error.value
        )
    assert snapshot(out) == before


@pytest.mark.parametrize(
    "edit, facts",
    [
        (lambda meta: dict(meta, finished=True), ["finished: True at step 6 of max_steps 12"]),
        (lambda meta: dict(meta, config=dict(meta["config"], lr=1e-2)), ["config_hash"]),
        (
            lambda meta: dict(meta, config=dict(meta["config"], lr=1e-2), config_hash="0123456789"),
            ["named after config hash"],
        ),
        (
            lambda meta: dict(
                meta, files=dict(model="model-0000003.safetensors", optimizer=meta["files"]["optimizer"])
            ),
            ["files.model", "step 6"],
        ),
        (lambda meta: {k: v for k, v in meta.items() if k != "sha256"}, ["sha256: missing"]),
        (lambda meta: {k: v for k, v in meta.items() if k != "model_version"}, ["model version 1", "Retrain"]),
    ],
)
def test_meta_that_contradicts_its_run_is_refused(tmp_path, capsys, edit, facts):
    "meta.json is checked against itself and its folder: hand-edited progress or config is not believed."
    cfg = TrainConfig(**TINY)
    out = run_dir(cfg)  # named after its config hash
    partial_run(out, steps=6)
    meta_path = out / "meta.json"
    meta_path.write_text(json.dumps(edit(json.loads(meta_path.read_text()))))
    before = snapshot(out)
    for use in (lambda: train(cfg, out, progress=False), lambda: load_run(out)):
        with pytest.raises(CheckpointError) as error:
            use()
        assert str(out) in str(error.value) and all(fact in str(error.value) for fact in facts), error.value
        assert "--force" in str(error.value), error.value
    code, err = posenc_train(["--config", write_config(tmp_path / "tiny.yaml"), "--out", out], capsys)
    assert code == 1 and str(out) in err, err
    assert snapshot(out) == before


def test_misplaced_folders_and_mismatched_shapes_are_named(tmp_path, capsys):
    """A folder where a run file belongs, a folder that is not a run, weights of another shape, lengths given as a
    string."""
    out, cfg = tmp_path / "run", partial_run(tmp_path / "run", steps=6)
    config = write_config(tmp_path / "tiny.yaml")
    for name in ("meta.json", "metrics.jsonl"):
        (out / name).rename(tmp_path / name)
        (out / name).mkdir()
        before = snapshot(out)
        code, err = posenc_train(["--config", config, "--out", out], capsys)
        assert code == 1 and f"{out / name} is a folder" in err and "move it elsewhere" in err, err
        assert snapshot(out) == before
        (out / name).rmdir()
        (tmp_path / name).rename(out / name)

    meta = read_meta(out)
    wider = dict(
        meta["config"], d_model=2 * TINY["d_model"]
    )  # config and hash edited together, in a folder not named after it
    (out / "meta.json").write_text(
        json.dumps(dict(meta, config=wider, config_hash=config_hash(TrainConfig.from_dict(wider))))
    )
    with pytest.raises(CheckpointError) as error:
        load_run(out)
    message = str(error.value)
    assert str(out / meta["files"]["model"]) in message and "[32] in the file, [64] in the model" in message, message
    assert message.count(" in the file") == 3 and "more" in message and "--force" in message, message

    with pytest.raises(CheckpointError, match="is not a run folder"):
        load_run(tmp_path)  # holds tiny.yaml: training there would be refused too
    finished = train(cfg, tmp_path / "finished", progress=False)
    with pytest.raises(ValueError, match="context_lengths must be a list of ints.*got '64'"):
        perplexity_by_length(finished.model, torch.arange(200), "64")
    (finished.out_dir / "scores.jsonl").mkdir()  # where the run's scores are kept
    with pytest.raises(
        RuntimeError, match=re.escape(f"{finished.out_dir / 'scores.jsonl'} is a folder") + ".*move it elsewhere"
    ):
        run_perplexity(finished, [16])
    assert not list((finished.out_dir / "scores.jsonl").iterdir())
    (finished.out_dir / "probes.jsonl").mkdir()  # where its probes are kept
    windows = probe_windows(
        finished.model, torch.arange(400) % 7, torch.arange(400) % 7, n_train=4, n_select=2, n_eval=2
    )
    with pytest.raises(
        RuntimeError, match=re.escape(f"{finished.out_dir / 'probes.jsonl'} is a folder, where the run's probes")
    ):
        run_probes(finished, windows, layers=[1], kinds=["linear"], epochs=1)
    assert not list((finished.out_dir / "probes.jsonl").iterdir())


def test_damaged_metrics_line_does_not_stop_the_resume(tmp_path, uninterrupted):
    out = tmp_path / "run"
    cfg = partial_run(out, steps=6)
    with open(out / "metrics.jsonl", "ab") as log:
        log.write(b'{"step": 7, "train_loss": \xff\xfe}\n[1, 2]\n')  # not UTF-8; not a line of the log
    run = train(cfg, out, progress=False)
    assert run.finished and read_metrics(out).step.tolist() == list(range(1, TINY["max_steps"] + 1))
    assert same(weights(out), uninterrupted)


# --- damaged data caches -------------------------------------------------------------------------------------------


def test_damaged_token_cache_stops_training(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("POSENC_DATA_DIR", str(tmp_path / "data"))
    docs = write_documents(tmp_path / "docs", n=5, lines=200)
    load_tokens(str(docs), "train", vocab_size=300, progress=False)
    stored = tokens_path(str(docs), "train", 300)
    flip_middle(stored)
    before = snapshot(tmp_path / "data")
    out = tmp_path / "run"
    code, err = posenc_train(
        ["--config", write_config(tmp_path / "tiny.yaml"), "--out", out, f"corpus={docs}", "vocab_size=300"], capsys
    )
    assert code == 1 and str(stored.parent) in err and "posenc-data fetch" in err, (
        err
    )  # what to delete, what rebuilds it
    assert not out.exists() and snapshot(tmp_path / "data") == before


def test_json_lines_corpus_faults_name_the_line_and_the_fix(tmp_path, monkeypatch):
    """Blank lines hold no document (before: 'not a JSON object'); a line without `text` and a missing split say what
    to write."""
    monkeypatch.setenv("POSENC_DATA_DIR", str(tmp_path / "data"))
    corpus = tmp_path / "jsonl"
    corpus.mkdir()
    document = lambda i: json.dumps({"text": f"Document {i}: the quick brown fox jumps over the lazy dog. " * 5})
    for split in ("train", "val", "test"):
        (corpus / f"{split}.jsonl").write_text("\n\n".join(document(i) for i in range(8)) + "\n\n")
    assert corpus_summary(str(corpus))["train"]["documents"] == 8
    for split, content, facts in [
        ("val", "\n\n\n", ["validation split", "no document"]),
        ("test", document(0) + '\n{"body": "x"}\n', ["test.jsonl, line 2", '{"text": "..."}']),
        ("test", None, ["no JSON Lines file for split(s) test", "test.jsonl"]),
    ]:
        corpus = shutil.copytree(tmp_path / "jsonl", tmp_path / f"{split}-{len(facts[0])}")
        if content is None:
            (corpus / f"{split}.jsonl").unlink()
        else:
            (corpus / f"{split}.jsonl").write_text(content)
        with pytest.raises(ValueError) as error:
            corpus_summary(str(corpus))
        assert all(fact in str(error.value) for fact in facts), error.value
    assert not list((tmp_path / "data" / "corpora").glob("*/complete.json"))[1:]  # only the good corpus was cached


def test_offline_hub_corpus_stops_training_at_once(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("POSENC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "run"
    code, err = posenc_train(
        ["--config", write_config(tmp_path / "tiny.yaml"), "--out", out, "corpus=wikitext-2"], capsys
    )
    assert code == 1 and "HF_HUB_OFFLINE" in err and "shakespeare" in err, err
    assert not out.exists()


# --- interrupted and failed writes ---------------------------------------------------------------------------------


def filling_the_disk(error: Exception, on_call: int):
    "A `torch.save` whose call number `on_call` writes half a file and fails as a full disk does."
    calls, real_save = [], torch.save

    def save(obj, path, *args, **kwargs):
        calls.append(path)
        if len(calls) < on_call:
            return real_save(obj, path, *args, **kwargs)
        Path(path).write_bytes(b"\0" * 1000)
        raise error

    return save


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 662"),
    ],
)
def test_full_disk_while_checkpointing(tmp_path, capsys, monkeypatch, uninterrupted, error):
    """torch reports a full disk without an errno (second case), and once its half-written file is removed the disk has
    room again: torch's words tell."""
    out = tmp_path / "run"
    config = write_config(tmp_path / "tiny.yaml")
    monkeypatch.setattr(torch, "save", filling_the_disk(error, on_call=2))  # the checkpoint of step 6
    if isinstance(error, RuntimeError):
        real_usage = shutil.disk_usage
        monkeypatch.setattr(
            shutil, "disk_usage", lambda p: real_usage(p)._replace(free=1 << 30)
        )  # the half file is gone
    code, err = posenc_train(["--config", config, "--out", out], capsys)
    assert code == 1 and "disk is full" in err and "step 6" in err and "step 3" in err, err
    assert sorted(p.name for p in out.iterdir()) == [
        "meta.json",
        "metrics.jsonl",
        "model-0000003.safetensors",
        "optimizer-0000003.pt",
    ]  # no temporary, no unreferenced file
    monkeypatch.undo()  # space was freed
    monkeypatch.setenv("POSENC_RUNS_DIR", str(tmp_path / "runs"))
    code, err = posenc_train(["--config", config, "--out", out], capsys)
    assert code == 0 and same(weights(out), uninterrupted)


def test_full_disk_while_building_a_token_cache(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("POSENC_DATA_DIR", str(tmp_path / "data"))
    docs = write_documents(tmp_path / "docs")

    def half_then_full(documents, tokenizer, path, *args, **kwargs):
        Path(path).write_bytes(b"\x93NUMPY")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tokens, "write_tokens", half_then_full)
    code, err = command(tokens.main, ["fetch", "--corpus", docs, "--vocab-size", "300", "--quiet"], capsys)
    assert code == 1 and "disk is full" in err, err
    token_files = [p.name for p in (tmp_path / "data" / "tokens").rglob("*") if p.is_file()]
    assert [name for name in token_files if not name.endswith(".lock")] == []  # nothing half-written kept


def test_what_a_kill_leaves_is_cleared_on_resume_and_on_force(tmp_path, uninterrupted):
    strays = [
        ".model-0000006.safetensors.tmp99999",
        ".optimizer-0000006.pt.tmp99999",
        ".meta.json.tmp99999",
        "model-0000006.safetensors",
    ]
    final = ["meta.json", "metrics.jsonl", "model-0000012.safetensors", "optimizer-0000012.pt"]
    for force in (False, True):
        out = tmp_path / f"run-{force}"
        cfg = partial_run(out)
        for name in strays:
            (out / name).write_bytes(b"half")
        train(cfg, out, force=force, progress=False)
        assert sorted(p.name for p in out.iterdir()) == final
        assert same(weights(out), uninterrupted)


def interrupt_in_step(number: int):
    "A `Trainer.train_step` that Ctrl-C interrupts in step `number` (counted from 1)."
    train_step = Trainer.train_step

    def step(self, index):
        if index == number - 1:
            raise KeyboardInterrupt
        return train_step(self, index)

    return step


def test_ctrl_c_says_where_and_how_to_resume(tmp_path, capsys, monkeypatch, uninterrupted):
    out = tmp_path / "run"
    monkeypatch.setattr(Trainer, "train_step", interrupt_in_step(8))
    code, err = posenc_train(["--config", write_config(tmp_path / "tiny.yaml"), "--out", out, "seed=0"], capsys)
    assert code == 130 and "step 8" in err and "step 6" in err, err  # where it stopped, the last checkpoint
    assert read_meta(out)["step"] == 6
    resume = re.search(r"`(posenc-train [^`]+)`", err).group(1)  # the command that resumes
    monkeypatch.undo()
    monkeypatch.setenv("POSENC_RUNS_DIR", str(tmp_path / "runs"))
    code, err = posenc_train(shlex.split(resume)[1:], capsys)
    assert code == 0 and same(weights(out), uninterrupted)


def test_ctrl_c_before_the_first_checkpoint_leaves_no_folder(tmp_path, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setattr(Trainer, "train_step", interrupt_in_step(2))
    with pytest.raises(TrainingInterrupted) as interrupt:
        train(TrainConfig(**TINY), out, progress=False)
    assert (interrupt.value.steps_done, interrupt.value.checkpoint) == (1, None)
    assert not out.exists()


def experiment(folder: Path, name: str, *cells: str) -> Path:
    "`folder` with one experiment notebook `name`: its parameters cell, then `cells`."
    folder.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "python3", "display_name": "python3", "language": "python"}}
    )
    nb.cells = [
        nbformat.v4.new_code_cell('profile = "cpu"\nout_dir = "."', metadata={"tags": ["parameters"]}),
        *map(nbformat.v4.new_code_cell, cells),
    ]
    nbformat.write(nb, folder / f"{name}.ipynb")
    return folder


def test_ctrl_c_stops_the_driver_without_publishing(tmp_path, capsys, monkeypatch):
    experiments = experiment(tmp_path / "experiments", "01_only")

    def interrupted(notebook, output, parameters):
        staging = Path(notebook).parent / parameters["out_dir"]  # the notebook's folder, relative to its own
        staging.mkdir(parents=True)
        (staging / "half.csv").write_text("a\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(reproduce, "run_notebook", interrupted)
    out = tmp_path / "figs"
    code, err = command(reproduce.main, ["--profile", "smoke", "--out", out, "--experiments-dir", experiments], capsys)
    assert code == 130 and "01_only" in err, err
    assert not snapshot(out)  # the interrupted notebook published nothing (its run's record aside)


def test_a_full_run_records_how_many_models_ran_side_by_side(tmp_path, capsys):
    "train_jobs None (the cpu profile's) is recorded as the number this machine allowed; before, the run crashed there."
    experiments = experiment(
        tmp_path / "experiments", "01_only", "from pathlib import Path\nPath(out_dir, 'done.csv').write_text('a\\n')"
    )
    out = tmp_path / "figs"
    code, err = command(
        reproduce.main,
        ["--profile", "smoke", "--out", out, "--experiments-dir", experiments, "train_jobs=null"],
        capsys,
    )
    assert code == 0, err
    timings = pd.read_csv(out / "reproduce_timings.csv")
    assert list(timings.notebook) == ["01_only"] and list(timings.train_jobs) == [usable_jobs()], timings


def as_console_script(prog: str, *args, **popen) -> subprocess.Popen:
    "The command `prog` started as its console script starts it (`pip install -e .` writes the same two lines)."
    entry = prog.replace("-", "_")
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import sys; from posenc_nb.commands import {entry}; sys.exit({entry}())",
            *map(str, args),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # Ctrl-C is on, even under `&`


@pytest.mark.parametrize(
    "prog, signum",
    [
        ("posenc-train", signal.SIGINT),
        ("posenc-reproduce", signal.SIGINT),
        ("posenc-data", signal.SIGTERM),
        ("posenc-bench", signal.SIGINT),
    ],
)
def test_ctrl_c_while_a_command_loads(tmp_path, prog, signum):
    "Before: a Ctrl-C in the seconds torch and papermill take to import printed a traceback from inside an import."
    job = as_console_script(prog, "--help", cwd=tmp_path)
    time.sleep(0.5)  # python is up, the imports are not done
    job.send_signal(signum)
    out, err = job.communicate(timeout=60)
    assert job.returncode == 130 and err.startswith(f"{prog}: interrupted") and "nothing was written" in err, err
    assert err.count("\n") == 1 and not out, (out, err)
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_ctrl_c_in_a_notebook_leaves_the_published_copy(tmp_path, capsys, monkeypatch):
    """A Ctrl-C while a notebook runs in its kernel: one message, and what the last complete run published is kept.
    Before: the kernel, stopped as it replied to the interrupted cell, printed a ZMQError traceback first."""
    experiments = experiment(
        tmp_path / "experiments",
        "01_sleepy",
        "import os, pathlib, time\n"
        "(pathlib.Path(out_dir) / 'table.csv').write_text(os.environ['TABLE'])\n"
        "time.sleep(float(os.environ['SLEEP']))",
    )
    out, args = tmp_path / "figs", ["--profile", "smoke", "--out", tmp_path / "figs", "--experiments-dir", experiments]
    monkeypatch.setenv("TABLE", "complete")
    monkeypatch.setenv("SLEEP", "0")
    assert command(reproduce.main, args, capsys)[0] == 0
    published = snapshot(out)
    assert published["table.csv"] == b"complete" and "notebooks/01_sleepy.ipynb" in published

    monkeypatch.setenv("TABLE", "half")
    monkeypatch.setenv("SLEEP", "120")
    job, staged = as_console_script("posenc-reproduce", *args), out / ".staging-01_sleepy" / "table.csv"
    for _ in range(1200):  # the kernel is in the cell
        if staged.exists() or job.poll() is not None:
            break
        time.sleep(0.1)
    assert staged.read_text() == "half"
    job.send_signal(signal.SIGINT)
    _, err = job.communicate(timeout=60)
    assert job.returncode == 130 and "01_sleepy" in err and "published nothing" in err, err
    assert "Traceback" not in err and "Error" not in err and err.count("\n") == 1, err
    assert snapshot(out) == published and not list(out.glob(".staging-*"))


def test_a_killed_run_leaves_no_kernel_socket_in_the_notebooks_folder(tmp_path, monkeypatch):
    """kill -9 of the runner while a notebook's kernel runs a cell. Before: the kernel's five `kernel-ipc-*` sockets
    stayed in the notebooks' folder (its working folder), where copying the folder failed on them; then their folder,
    with its sockets, stayed in the system's temporary folder."""
    experiments = experiment(
        tmp_path / "experiments",
        "01_sleepy",
        "import pathlib, time\n(pathlib.Path(out_dir) / 'table.csv').write_text('half')\ntime.sleep(120)",
    )
    out, temporary = tmp_path / "figs", tmp_path / "tmp"
    temporary.mkdir()
    job = as_console_script(
        "posenc-reproduce",
        "--profile",
        "smoke",
        "--out",
        out,
        "--experiments-dir",
        experiments,
        env={**os.environ, "TMPDIR": str(temporary)},
    )
    staged = out / ".staging-01_sleepy" / "table.csv"
    for _ in range(1200):  # the kernel is in the cell
        if staged.exists() or job.poll() is not None:
            break
        time.sleep(0.1)
    assert staged.exists(), job.communicate(timeout=10)
    job.kill()  # SIGKILL: no clean-up of the runner's runs
    job.wait(timeout=60)
    assert sorted(p.name for p in experiments.iterdir() if not p.name.endswith(".ipynb")) == []
    # its kernel's folder, left in the temporary folder, is cleared by the next run; a live runner's is not
    [dead] = temporary.glob("posenc-kernel-*")
    live = temporary / "posenc-kernel-live"
    live.mkdir()
    with open(live / "runner.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        monkeypatch.setattr(tempfile, "tempdir", str(temporary))
        reproduce.clear_dead_kernel_folders()
    assert sorted(p.name for p in temporary.iterdir()) == ["posenc-kernel-live"], list(temporary.iterdir())


def test_full_disk_while_a_notebook_is_published(tmp_path, capsys, monkeypatch):
    """The disk fills while papermill writes the executed copy. Before: the clean-up read the cut copy back, and its
    "Notebook does not appear to be JSON" (exit 2) took the place of the full disk."""
    experiments = experiment(
        tmp_path / "experiments",
        "01_table",
        "import os, pathlib\n(pathlib.Path(out_dir) / 'table.csv').write_text(os.environ['TABLE'])",
    )
    out, args = tmp_path / "figs", ["--profile", "smoke", "--out", tmp_path / "figs", "--experiments-dir", experiments]
    monkeypatch.setenv("TABLE", "complete")
    assert command(reproduce.main, args, capsys)[0] == 0
    published = snapshot(out)

    write = LocalHandler.write

    def filling_the_disk(handler, buf, path):  # the executed copy, once a cell has run: half of it, then no space
        if '"status": "completed"' not in buf:
            return write(handler, buf, path)
        Path(path).write_text(buf[: len(buf) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(LocalHandler, "write", filling_the_disk)
    monkeypatch.setenv("TABLE", "half")
    code, err = command(reproduce.main, args, capsys)
    assert code == 1 and "the disk is full" in err and "JSON" not in err, err
    assert snapshot(out) == published and not list(out.glob(".staging-*"))  # nothing published, nothing lost


@pytest.mark.parametrize("damage", [b'{"cells": [', b"", b"[]", b"\xff\xfe"])
def test_a_damaged_experiment_notebook_is_named(tmp_path, capsys, damage):
    """Before: a cut notebook in --experiments-dir gave papermill\'s "Notebook does not appear to be JSON", naming no
    file."""
    experiments = experiment(tmp_path / "experiments", "01_fine")
    (experiments / "02_cut.ipynb").write_bytes(damage)
    code, err = command(
        reproduce.main, ["--profile", "smoke", "--out", tmp_path / "figs", "--experiments-dir", experiments], capsys
    )
    assert code == 1 and f"{experiments / '02_cut.ipynb'} is not a readable notebook" in err, err
    assert (
        f"git checkout -- {experiments / '02_cut.ipynb'}" in err and "move it out of the experiments folder" in err
    ), err
    assert not (tmp_path / "figs").exists()  # checked before anything ran


# --- two processes, one folder -------------------------------------------------------------------------------------


def test_lock_is_taken_on_the_resolved_folder(tmp_path, monkeypatch):
    locked, real_lock = [], posenc_nb.train.file_lock
    monkeypatch.setattr(posenc_nb.train, "file_lock", lambda path: locked.append(path) or real_lock(path))
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    cfg = TrainConfig(**{**TINY, "max_steps": 3})
    train(cfg, tmp_path / "link", progress=False)
    train(cfg, tmp_path / "x" / ".." / "real", progress=False)
    assert locked == [real.resolve()] * 2


def test_a_trainer_waiting_on_a_held_run_folder_says_who_holds_it(tmp_path):
    """The folder is held by another process (here the test, as a trainer stopped with Ctrl-Z would hold it). Before:
    the second trainer waited without a word."""
    out, config = tmp_path / "run", write_config(tmp_path / "tiny.yaml", max_steps=3)
    with open(tmp_path / "run.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("4242")
        held.flush()
        job = subprocess.Popen(
            [str(POSENC_TRAIN), "--config", str(config), "--out", str(out), "--no-progress"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        said = job.stderr.readline()  # once the trainer is up: what it says while it waits
        assert f"{out} is held by process 4242 since " in said and "waiting" in said, said
        assert "`kill -CONT 4242`" in said and "`kill 4242`" in said, said
        time.sleep(1)
        assert job.poll() is None and not out.exists()  # still waiting, nothing written
    _, err = job.communicate(timeout=240)  # released: it trains
    assert job.returncode == 0 and "held by" not in err, err  # said once
    assert read_meta(out)["step"] == 3


def test_two_trainings_through_a_symlink_take_turns(tmp_path):
    "Before: both trained at once, and metrics.jsonl interleaved two configs under one meta.json."
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real)
    keys = {**TINY, "max_steps": 150, "checkpoint_interval": 150, "eval_interval": 50}
    jobs = [
        subprocess.Popen(
            [
                str(POSENC_TRAIN),
                "--config",
                str(write_config(tmp_path / "tiny.yaml", **keys)),
                "--out",
                str(out),
                f"lr={lr}",
                "--no-progress",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for out, lr in ((real, 3e-3), (link, 2e-3))
    ]
    results = [(job.wait(timeout=300), job.stderr.read()) for job in jobs]
    assert sorted(code for code, _ in results) == [0, 1], results  # one trained; the other waited, then refused
    loser = next(err for code, err in results if code == 1)
    assert "another config" in loser and "Traceback" not in loser, loser
    winner_lr = (3e-3, 2e-3)[[code for code, _ in results].index(0)]
    assert read_meta(real)["config"]["lr"] == winner_lr
    assert read_metrics(real).step.tolist() == list(range(1, 151))  # one config's log, each step once


# --- the library, misused ------------------------------------------------------------------------------------------


def test_checkpoint_on_every_interval_not_only_on_logging_steps(tmp_path):
    "Before: a checkpoint was written only on steps that also logged or evaluated."
    out = tmp_path / "run"
    trainer = Trainer(
        TrainConfig(**{**TINY, "checkpoint_interval": 3, "log_interval": 5, "eval_interval": 10}), out, progress=False
    )
    trainer.fit(4)
    assert read_meta(out)["step"] == 3
    trainer.fit(3)
    trainer.close()
    assert read_meta(out)["step"] == 6


def test_run_folder_arguments(tmp_path, monkeypatch):
    cfg = TrainConfig(**TINY)
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ConfigError) as error:
        train(cfg, tmp_path / "a-file", progress=False)
    assert error.value.keys == ["out"]
    with pytest.raises(CheckpointError, match="no meta.json"):
        load_run(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="a-file"):
        train(cfg, "", progress=False)  # the current folder, which holds other things
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


@pytest.mark.parametrize(
    "name, value, facts",
    [
        ("eval_lengths", [16, 64], ["32"]),  # omits the training length
        ("seeds", [], ["seeds"]),
        ("table_encodings", ["learned", "alibi"], ["nopos"]),
        ("train_lengths", [48], ["48", "128"]),  # does not divide 32 x 4 tokens
        ("shuffled_sentence", "The dog sat", ["The dog sat"]),
        ("model_sizes", {"odd": {"d_model": 33}}, ["model_sizes", "33"]),  # not a multiple of the heads
        ("corpus", "no-such-corpus", ["no-such-corpus"]),
        ("eval_tokens", 0, ["eval_tokens"]),
        # ignored before: the notebook sets each model's encoding itself
        ("modern_settings", {"n_layer": 2, "pos_encoding": "alibi"}, ["sets pos_encoding", "leave it out"]),
        # blamed before on a layer pattern and the model, neither given by the user
        ("modern_settings", {"n_layer": 1}, ["n_layer=1", "give n_layer of at least 2 in modern_settings"]),
    ],
)
def test_experiment_parameters_are_checked_one_by_one(name, value, facts):
    with pytest.raises(ConfigError) as error:
        enforce_parameter_rules(dict(PROFILES["smoke"], profile="smoke", **{name: value}))
    assert error.value.keys == [name] and all(fact in str(error.value) for fact in facts), error.value


# --- round four: claims and timings files, what a task run is given, the library's arguments, refused folders -------


def claims_notebook(folder: Path) -> Path:
    "`folder` with one experiment notebook, 01_claims, that saves one claim."
    return experiment(
        folder,
        "01_claims",
        "from posenc_nb.claims import Claim, save_claims\n"
        "save_claims([Claim('a', 'reproduces', 'ours', 'theirs', 'rule', 'details')], out_dir, '01_claims')",
    )


def test_claims_of_a_notebook_the_run_does_not_know_are_named_and_left_out(tmp_path):
    "Before: claims/NAME.csv of a notebook since renamed was gathered into claims.csv in silence."
    experiments, out = claims_notebook(tmp_path / "experiments"), tmp_path / "figs"
    stale = out / "claims" / "00_renamed.csv"
    stale.parent.mkdir(parents=True)
    stale.write_text("notebook,claim,status,ours,paper,rule\n00_renamed,old,reproduces,x,y,z\n")
    said = []
    reproduce.reproduce("smoke", out_dir=out, experiments_dir=experiments, only=["01"], log=said.append)
    assert any("00_renamed.csv" in line and "left out" in line and "delete them" in line for line in said), said
    assert pd.read_csv(out / "claims.csv").notebook.tolist() == ["01_claims"]
    assert stale.read_text().startswith("notebook,claim")  # named and left out, not deleted


@pytest.mark.parametrize(
    "damage, facts",
    [
        (
            lambda claims: (claims / "01_claims.csv").write_text("notebook,claim\n01_claims,a\n"),
            ["01_claims.csv lacks the columns"],
        ),
        (
            lambda claims: (claims / "01_claims.csv").write_bytes(b"\xff\xfe\x00\x01"),
            ["01_claims.csv is not a CSV file of claims"],
        ),
        (
            lambda claims: (claims / "01_claims.csv").mkdir(),
            ["01_claims.csv is a folder where notebook 01_claims's claims file"],
        ),
        (
            lambda claims: claims.rmdir() or claims.write_text("x"),
            ["claims is a file where the folder", "move it away"],
        ),
        (
            lambda claims: (claims / "01_claims.csv").write_text(
                "notebook,claim,status,ours,paper,rule,details\n06_probe,a,reproduces,x,y,z,w\n"
            ),
            ["01_claims.csv holds claims of notebook 06_probe, though its name says they are notebook 01_claims's"],
        ),
    ],
)
def test_a_damaged_claims_file_is_named_before_any_work(tmp_path, capsys, damage, facts):
    """Before: a part without its columns gave blank statuses and "rerun posenc-reproduce" (a loop); a binary part
    ended in codec text after a notebook had published; `claims` as a file, or a part that is a folder, named nothing
    we wrote."""
    experiments, out = claims_notebook(tmp_path / "experiments"), tmp_path / "figs"
    (out / "claims").mkdir(parents=True)
    damage(out / "claims")
    before = snapshot(out)
    code, err = command(reproduce.main, ["--profile", "smoke", "--out", out, "--experiments-dir", experiments], capsys)
    assert code == 1 and all(fact in err for fact in facts), err
    if "lacks" in facts[0] or "CSV" in facts[0] or "holds claims" in facts[0]:
        assert "`posenc-reproduce --only 01_claims`" in err and "delete it" in err, err  # what writes it anew: no loop
    assert snapshot(out) == before and not (out / "notebooks").exists()  # refused before any notebook ran


@pytest.mark.parametrize("damage", [b"\xff\xfe\x00\x01", b"", b"notebook,seconds\n01_only,1.0\n"])
def test_a_damaged_timings_file_is_set_aside_and_the_run_timed(tmp_path, capsys, damage):
    """Binary, empty, or without its `profile` column. Before: an --only run published its notebook, then failed with
    codec text, "No columns to parse" or an unexpected AttributeError, naming no file; the run's times were lost."""
    experiments = experiment(tmp_path / "experiments", "01_only")
    out = tmp_path / "figs"
    out.mkdir()
    timings = out / "reproduce_timings.csv"
    timings.write_bytes(damage)
    capsys.readouterr()
    code = reproduce.main(
        ["--profile", "smoke", "--only", "01", "--out", str(out), "--experiments-dir", str(experiments)]
    )
    said = capsys.readouterr().out
    assert code == 0 and f"{timings} " in said and "set aside as reproduce_timings.damaged.csv" in said, said
    assert (out / "reproduce_timings.damaged.csv").read_bytes() == damage  # kept, not overwritten
    assert pd.read_csv(timings).notebook.tolist() == ["01_only"]  # this run's times recorded
    assert (out / "notebooks" / "01_only.ipynb").exists()


@pytest.mark.parametrize(
    "override, key",
    [
        ("corpus=nosuch", "corpus: 'nosuch' would not be used"),
        ("tokenizer=/nonexistent/tok.json", "tokenizer: /nonexistent/tok.json would not be used"),
    ],
)
def test_a_task_run_refuses_corpus_and_tokenizer_settings(tmp_path, capsys, override, key):
    """Before: `posenc-train task=copy corpus=nosuch` trained without a word, and the unused corpus entered the
    config hash."""
    out = tmp_path / "run"
    code, err = posenc_train(
        ["--out", out, "task=copy", "seq_len=42", "max_steps=1", "warmup_steps=0", override], capsys
    )
    assert code == 2 and key in err and "task 'copy'" in err, err
    assert not list(tmp_path.iterdir())  # nothing made
    # a task run with the default corpus and tokenizer keeps the hash that names its committed run folder
    assert config_hash(TrainConfig(task="copy", vocab_size=70, seq_len=42)) == "9a26320c9e"


def tiny_model() -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(
        ModelConfig(vocab_size=300, n_layer=2, n_head=2, d_model=16, max_len=32, pos_encoding="nopos")
    ).eval()


def test_library_functions_check_their_arguments_first(monkeypatch):
    """Before: a bare KeyError, a frame with no columns, an AttributeError, a ZeroDivisionError after some scoring,
    and so on."""
    model, tokens = tiny_model(), torch.randint(0, 300, (2000,)).numpy()
    scored = []
    real_perplexity = evaluate.perplexity_by_length
    monkeypatch.setattr(evaluate, "perplexity_by_length", lambda *a, **k: scored.append(a) or real_perplexity(*a, **k))
    cases = [
        (lambda: task_examples("nosuch", 2, 0), "task must be one of repeat, replace, copy, reverse, got 'nosuch'"),
        (lambda: exact_match(model, "copy", lengths=[]), "lengths must not be empty, got []"),
        (lambda: task_examples("copy", 2, seed=2**64), "seed must be an integer in [0, 2**64)"),
        (
            lambda: evaluate.attention_scale_sweep(model, tokens, [16], [1.0, 1.5], train_length=1),
            "train_length must be at least 2 for the log-length rule",
        ),
        (
            lambda: evaluate.attention_scale_sweep(model, tokens, [1, 16], [1.0], train_length=16),
            "context_lengths each entry must be at least 2",
        ),
        (
            lambda: probe_layers(
                model, probe_windows(model, tokens, tokens, n_train=2, n_select=1, n_eval=1), layers=["1"]
            ),
            "layer '1' (a str, not an integer) does not exist",
        ),
    ]
    for call, said in cases:
        with pytest.raises(ValueError) as error:
            call()
        assert said in str(error.value), error.value
    assert not scored  # refused before any factor was scored
    pytest.importorskip("transformer_lens")
    from posenc_nb.interop import from_hooked_transformer

    with pytest.raises(TypeError, match="got a TransformerLM, which is our model already"):
        from_hooked_transformer(model)


def test_a_seed_out_of_range_is_bad_input_to_training_and_plan(tmp_path, capsys):
    'Before: posenc-train seed=18446744073709551616 ended in torch\'s "Overflow when unpacking long long".'
    for main, args, key in [
        (posenc_nb.train.main, ["--out", tmp_path / "run", f"seed={2**64}", "--no-progress"], "seed: "),
        (
            plan.plan_main,
            ["--profile", "smoke", f"seeds=[{2**64}]", "--out", tmp_path / "plan.sh"],
            "seeds: each entry ",
        ),
    ]:  # the profile's own key, before any run is planned
        code, err = command(main, args, capsys)
        assert code == 2 and f"{key}must be an integer in [0, 2**64), the seeds torch takes, got {2**64}" in err, err
    assert not list(tmp_path.iterdir())


def test_a_data_folder_the_os_refuses_names_the_setting(tmp_path, capsys, monkeypatch):
    """Under /proc, and read-only (as the OS answers a read-only mount: this test may run as root, whom permissions do
    not stop). Before: "[Errno 2]" or "[Errno 30]" on a `.lock`, naming no setting."""
    read_only = tmp_path / "data"
    read_only.mkdir()
    real_temporary = tempfile.TemporaryFile

    def refusing(*args, dir=None, **kwargs):
        if Path(dir) == read_only:
            raise OSError(errno.EROFS, "Read-only file system")
        return real_temporary(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "TemporaryFile", refusing)
    for folder, reason in [
        ("/proc/data", "/proc takes no new files (the OS says: No such file or directory)"),
        (read_only, f"{read_only} takes no new files (the OS says: Read-only file system)"),
    ]:
        monkeypatch.setenv("POSENC_DATA_DIR", str(folder))
        code, err = posenc_train(["--out", tmp_path / "run", "max_steps=1", "warmup_steps=0"], capsys)
        assert code == 2 and f"POSENC_DATA_DIR={folder} cannot be used: {reason}" in err, err
        assert "set POSENC_DATA_DIR to a folder you can write to" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"] and not list(
        read_only.iterdir()
    )  # no run lock either


def test_a_matmul_the_machine_cannot_hold_is_refused_before_work(capsys, monkeypatch):
    "Before: posenc-bench matmul_size=1000000 ended in the allocator's text."
    monkeypatch.setattr(step_speed, "matmul_peak_flops", lambda *a, **k: pytest.fail("the benchmark started"))
    code, err = command(bench.main, ["matmul_size=1000000"], capsys)
    assert code == 2 and "matmul_size: must be at most 16384: two 1000000 x 1000000 matrices take 7451 GiB" in err, err


def test_full_disk_while_the_bench_report_is_written(tmp_path, capsys, monkeypatch):
    "Before: the generic paragraph, and a 0-byte bench.md left behind."
    report = tmp_path / "bench.md"
    report.write_text("# an earlier report\n")
    monkeypatch.setattr(bench, "run_benchmark", lambda **keys: "the report")
    real_write = Path.write_text

    def half_then_full(path, text, *args, **kwargs):
        real_write(path, text[: len(text) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", half_then_full)
    code, err = command(bench.main, ["--out", report], capsys)
    monkeypatch.undo()
    assert code == 1 and f"the disk is full: --out {report} was not written, and nothing was left there" in err, err
    assert os.listdir(tmp_path) == ["bench.md"] and report.read_text() == "# an earlier report\n"


def test_full_disk_while_the_plan_is_written(tmp_path, capsys, monkeypatch):
    'Before: the generic "a run resumes from its last checkpoint" paragraph, and a 0-byte plan.sh left behind.'
    script = tmp_path / "plan.sh"
    script.write_text("# the plan of an earlier run\n")
    real_write = Path.write_text

    def half_then_full(path, text, *args, **kwargs):
        real_write(path, text[: len(text) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", half_then_full)
    code, err = command(plan.plan_main, ["--profile", "smoke", "--out", script], capsys)
    monkeypatch.undo()
    assert code == 1 and f"the disk is full: --out {script} was not written, and nothing was left there" in err, err
    assert "checkpoint" not in err, err
    assert os.listdir(tmp_path) == ["plan.sh"] and script.read_text() == "# the plan of an earlier run\n"


def test_a_run_cut_short_keeps_the_times_it_measured(tmp_path, capsys, monkeypatch):
    """Each notebook's time is written as it ends: interrupted in the second, the first's stays, and --only adds the
    second's."""
    experiments = experiment(tmp_path / "experiments", "01_first")
    experiment(experiments, "02_second")
    real = reproduce.run_notebook

    def second_interrupted(notebook, output, parameters):
        if Path(notebook).stem == "02_second":
            raise KeyboardInterrupt
        return real(notebook, output, parameters)

    monkeypatch.setattr(reproduce, "run_notebook", second_interrupted)
    out, args = tmp_path / "figs", ["--profile", "smoke", "--experiments-dir", experiments]
    code, err = command(reproduce.main, [*args, "--out", out], capsys)
    assert code == 130 and "02_second" in err, err
    assert list(pd.read_csv(out / "reproduce_timings.csv").notebook) == ["01_first"]
    monkeypatch.setattr(reproduce, "run_notebook", real)
    code, err = command(reproduce.main, [*args, "--out", out, "--only", "02_second"], capsys)
    assert code == 0, err
    assert list(pd.read_csv(out / "reproduce_timings.csv").notebook) == ["01_first", "02_second"]


# --- round five: a diverged run's checkpoint, a replaced parent, a part that names another notebook, a scale -------


def test_an_update_that_overflows_the_weights_is_divergence_and_never_checkpointed(tmp_path, capsys):
    """Before: the gradient guard passed step 1's finite gradient, its update overflowed bfloat16's weights to inf, the
    checkpoint of step 1 held them, and the divergence at step 2 called it "kept"; load_run served it."""
    out, config = tmp_path / "run", write_config(tmp_path / "overflow.yaml")
    overflow = ["dtype=bfloat16", "lr=1e39", "min_lr=0", "warmup_steps=0", "checkpoint_interval=1"]
    code, err = posenc_train(["--config", config, "--out", out, *overflow], capsys)
    assert code == 1 and "the weights hold inf or NaN" in err and "after the update of step 1" in err, err
    assert "no checkpoint had been written" in err and "Lower lr" in err, err
    assert not out.exists()  # nothing of non-finite weights was kept


def test_a_checkpoint_of_nonfinite_weights_is_refused_by_load_and_resume(tmp_path, capsys):
    "Before: an older version's checkpoint of a diverged run loaded (perplexity NaN) and resumed into the same end."
    out, cfg = tmp_path / "run", TrainConfig(**TINY)
    model = TransformerLM(cfg.model_config())
    with torch.no_grad():
        model.blocks[0].attn.qkv.weight[0, 0] = float("nan")
    out.mkdir()
    save_checkpoint(out, model, torch.optim.AdamW(model.parameters()), cfg, step=3, tokens=768, finished=False)
    before = snapshot(out)
    with pytest.raises(CheckpointError, match=r"holds non-finite weights \(inf or NaN in blocks\.0\.attn\.qkv\.weight"):
        load_run(out)
    code, err = posenc_train(["--config", write_config(tmp_path / "tiny.yaml"), "--out", out], capsys)
    assert code == 1 and "non-finite weights" in err and "--force" in err and "lowering lr" in err, err
    assert snapshot(out) == before


def test_a_child_run_is_reused_only_while_its_parent_holds_the_weights_it_started_from(tmp_path, capsys):
    """Before: a finished DroPE child was reused after its parent folder was replaced by another run (its meta.json
    named the parent, with no checksum); a damaged parent was met with --force for the child; a start-token parent
    was continued without the token in silence."""
    parent_cfg = TrainConfig(**TINY, pos_encoding="rope")
    parent = train(parent_cfg, tmp_path / "parent", progress=False)
    child_cfg = drope(parent)
    child = train(child_cfg, tmp_path / "child", progress=False)
    assert read_meta(child.out_dir)["parent_sha256"] == read_meta(parent.out_dir)["sha256"]["model"]
    with_token = replace(child_cfg, start_token=True)
    with pytest.raises(ConfigError, match="start_token: True, but the parent run .* give start_token=False"):
        train(with_token, tmp_path / "with-token", progress=False)
    assert not (tmp_path / "with-token").exists()

    train(replace(parent_cfg, seed=1), parent.out_dir, force=True, progress=False)  # the parent replaced
    before = snapshot(child.out_dir)
    with pytest.raises(CheckpointError, match="no longer holds the weights the run in .* --force") as error:
        train(child_cfg, child.out_dir, progress=False)
    assert str(parent.out_dir) in str(error.value) and snapshot(child.out_dir) == before, error.value
    meta = read_meta(child.out_dir)
    del meta["parent_sha256"]  # a child written before children recorded their parent
    (child.out_dir / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="records no checksum of the weights of its parent run"):
        train(child_cfg, child.out_dir, progress=False)

    flip_middle(parent.out_dir / read_meta(parent.out_dir)["files"]["model"])  # a damaged parent: repair the parent
    with pytest.raises(CheckpointError, match="the parent run .* cannot be used: .*retrain the parent") as error:
        train(child_cfg, tmp_path / "second-child", progress=False)
    assert "--force on this run would not repair its parent" in str(error.value), error.value
    assert not (tmp_path / "second-child").exists()


@pytest.mark.parametrize("first", ["posenc_nb.encodings", "posenc_nb.config", "posenc_nb.later_encodings"])
def test_the_encodings_registry_is_whole_whatever_is_imported_first(first):
    """Before: `from posenc_nb.encodings import get_encoding; get_encoding("kerple", ...)` said kerple must be one of
    the paper's five, and a loop over ENCODINGS covered five (the later ones registered only with their module)."""
    script = (
        f"import json, {first}; from posenc_nb.encodings import ENCODINGS, get_encoding; "
        "get_encoding('kerple', 32, 2, 64); print(json.dumps(list(ENCODINGS)))"
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert json.loads(found) == ["nopos", "learned", "sinusoidal", "rope", "alibi", "t5", "kerple", "fire", "xpos"]


def test_the_claims_table_and_findings_files_name_what_is_wrong_with_them(tmp_path):
    """Before: a binary claims.csv ended in a bare UnicodeDecodeError, a folder in place of a findings CSV in
    IsADirectoryError, a findings file of another notebook was quoted under this one, and a claims.csv missing beside
    the notebooks' files of claims read as "no notebook has saved its claims yet"."""
    figures = tmp_path / "figs"
    save_claims([Claim("a", "reproduces", "ours", "theirs", "rule", "details")], figures, "01_claims")
    with pytest.raises(ValueError, match=r"claims\.csv is missing, but .*holds the claims of 01_claims: `write_claims"):
        read_claims(figures)
    write_claims_table(figures)
    (figures / "claims.csv").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(
        ValueError, match=r"claims\.csv is not a CSV file of claims \(UnicodeDecodeError.*writes it anew"
    ):
        read_claims(figures)
    (figures / "findings" / "06_probe.csv").mkdir(parents=True)
    with pytest.raises(RuntimeError, match="06_probe.csv is a folder where notebook 06_probe's findings file belongs"):
        read_findings(figures, "06_probe")
    (figures / "findings" / "11_length.csv").write_text("notebook,subject,finding\n06_probe,a model,a finding\n")
    with pytest.raises(RuntimeError, match="holds findings of notebook 06_probe, though its name says .* 11_length's"):
        read_findings(figures, "11_length")


def test_a_scaled_score_is_never_served_for_an_unscaled_call(tmp_path):
    """Before: run_perplexity inside scaled_attention(model, 4.0) kept the scaled perplexity under the plain key, and a
    later plain call served it."""
    run = train(TrainConfig(**TINY), tmp_path / "run", progress=False)
    plain = run_perplexity(run, [16], max_tokens=256).perplexity[0]
    with evaluate.scaled_attention(run.model, 4.0):
        scaled = run_perplexity(run, [16], max_tokens=256).perplexity[0]
    assert scaled != plain and run_perplexity(run, [16], max_tokens=256).perplexity[0] == plain
    kept = [json.loads(line) for line in (run.out_dir / "scores.jsonl").read_text().splitlines()]
    assert [line["rows"][0]["perplexity"] for line in kept] == [plain]  # only the plain model's score was kept


def word_tokenizer(path: Path, words: int) -> Path:
    "A tokenizers JSON file of `words` words and an unknown token, without any of the special tokens."
    from tokenizers import Tokenizer, models

    vocab = {f"w{i}": i for i in range(words)} | {"[UNK]": words}
    Tokenizer(models.WordLevel(vocab, unk_token="[UNK]")).save(str(path))
    return path


@pytest.mark.parametrize(
    "overrides, facts, not_said",
    [
        (["pos_options={floor_scale: .inf}"], ["floor_scale", "finite", "got 0.0 and inf"], "Infinity"),
        (["pos_encoding=rope", "nopos_layers=every-2"], ["n_layer=1", "give n_layer of at least 2"], "'every-1'"),
        (["tokenizer={words}", "vocab_size=301", "start_token=true"], ["vocab_size: 301", "at least 304"], "model:"),
    ],
)
def test_config_values_that_cannot_work_say_what_to_give(tmp_path, capsys, overrides, facts, not_said):
    """Before: floor_scale=inf went into meta.json as bare Infinity; a one-layer hybrid was offered every-1, itself
    refused; a tokenizer without an end-of-text token under start_token was told its id is out of range."""
    words, out = word_tokenizer(tmp_path / "words.json", 300), tmp_path / "run"
    args = [o.replace("{words}", str(words)) for o in overrides]
    code, err = posenc_train(["--config", write_config(tmp_path / "tiny.yaml"), "--out", out, *args], capsys)
    assert code == 2 and all(fact in err for fact in facts) and not_said not in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    "override, key, facts",
    [
        ("batch_size=1000000", "batch_size", ["batch_size x seq_len = 128000000 tokens", "smaller batch_size"]),
        ("lengths=[128,100000000]", "lengths", ["at T=100000000", "lengths of at most"]),
        ("preset=gpt3-1.3b", "preset", ["holds 9 model(s)", "a smaller preset"]),
    ],
)
def test_bench_sizes_beyond_memory_are_refused_before_work(capsys, monkeypatch, override, key, facts):
    "Before: posenc-bench took any batch_size, lengths or preset, and ended in the allocator's text or a child's trace."
    monkeypatch.setattr(bench, "_available_memory", lambda: 8 * 2**30)
    monkeypatch.setattr(step_speed, "matmul_peak_flops", lambda *a, **k: pytest.fail("the benchmark started"))
    code, err = command(bench.main, [override], capsys)
    assert code == 2 and f"{key}: " in err and "8.0 GiB available" in err and all(f in err for f in facts), err


def test_an_interrupted_bench_says_nothing_was_kept(tmp_path, capsys, monkeypatch):
    'Before: Ctrl-C while it measured said "rerun to go on", though a benchmark keeps nothing it measured.'

    def interrupted(**keys):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "run_benchmark", interrupted)
    code, err = command(bench.main, ["--out", tmp_path / "bench.md"], capsys)
    assert code == 130 and "keeps none of what it measured" in err and "rerun to go on" not in err, err
    assert not (tmp_path / "bench.md").exists()
