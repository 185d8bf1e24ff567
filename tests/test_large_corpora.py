"""A large corpus the way the paper's Pile models need it, at the scale of a test: JSON Lines shards compressed as The
Pile ships them, streamed into a corpus cache and a token file, tokenized by a tokenizer laid out as GPT-2's (ordinary
tokens first, `<|endoftext|>` last, `<mask>` and `<pad>` added after it), and models of both objectives trained on it.
Everything is made here: no hub, no network."""

import gzip
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import zstandard
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from posenc_nb.checkpoint import load_run
from posenc_nb.config import ConfigError, TrainConfig
from posenc_nb.corpora import corpus_summary, load_corpus
from posenc_nb.evaluate import perplexity_by_length
from posenc_nb.order import masked_perplexity
from posenc_nb.scores import run_perplexity
from posenc_nb.special_tokens import EOS
from posenc_nb.tokens import document_lengths, load_tokens, read_tokenizer, special_ids, tokens_path
from posenc_nb.train import train
from posenc_nb.files import REPO_ROOT

WORDS = "the cat sat on a mat while every dog ran to its log and no bird flew over any tree".split()


def document(rng) -> str:
    return " ".join(rng.choice(WORDS, size=int(rng.integers(20, 60)))) + "."


@pytest.fixture
def pile(tmp_path, monkeypatch):
    "The Pile's layout in miniature: train/00-01.jsonl.zst, val.jsonl.zst, test.jsonl.zst; and a private data folder."
    monkeypatch.setenv("POSENC_DATA_DIR", str(tmp_path / "data"))
    rng, root = np.random.default_rng(0), tmp_path / "pile"
    (root / "train").mkdir(parents=True)
    sizes = {"train/00": 150, "train/01": 150, "val": 20, "test": 20}
    for name, n in sizes.items():
        lines = "".join(
            json.dumps({"text": document(rng), "meta": {"pile_set_name": "Pile-CC"}}) + "\n" for _ in range(n)
        )
        (root / f"{name}.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines.encode()))
    return root


@pytest.fixture
def gpt2_like(tmp_path, pile) -> str:
    "A byte-level BPE tokenizer file laid out as GPT-2's: its only special token, <|endoftext|>, is its last id."
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(
        WORDS * 20,
        trainers.BpeTrainer(vocab_size=320, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
    )
    tokenizer.add_special_tokens([EOS])
    path = tmp_path / "gpt2-like.json"
    tokenizer.save(str(path))
    return str(path)


def test_a_json_lines_corpus_streams_into_a_cache_and_tokens(pile, gpt2_like):
    corpus = load_corpus(str(pile))
    assert [corpus[split].num_rows for split in ("train", "validation", "test")] == [300, 20, 20]
    assert corpus_summary(str(pile))["validation"]["documents"] == 20
    assert corpus["train"][0]["id"] == "train/00.jsonl.zst:1"
    tokens = load_tokens(str(pile), "train", tokenizer=gpt2_like, progress=False)
    specials = special_ids(read_tokenizer(gpt2_like))
    assert specials.eos == Tokenizer.from_file(gpt2_like).get_vocab_size() - 1  # where the file has it, not moved to 0
    assert len(document_lengths(tokens, eos=specials.eos)) == 300 and tokens[-1] == specials.eos
    tokenizer = read_tokenizer(gpt2_like)
    first = np.asarray(tokens[: int(np.argmax(tokens == specials.eos))])
    assert tokenizer.decode(first.tolist()) == corpus["train"][0]["text"]


@pytest.mark.parametrize("objective", ["clm", "mlm"])
def test_models_train_on_it_with_the_gpt2_layout(tmp_path, pile, gpt2_like, objective):
    size = read_tokenizer(gpt2_like).get_vocab_size()
    cfg = TrainConfig.from_preset(
        "smoke",
        corpus=str(pile),
        tokenizer=gpt2_like,
        vocab_size=size,
        objective=objective,
        pos_encoding="alibi",
        n_layer=1,
        d_model=32,
        n_head=2,
        seq_len=32,
        batch_size=8,
        max_steps=40,
        warmup_steps=4,
        eval_batches=1,
    )
    run = train(cfg, tmp_path / "run", progress=False)
    assert run.finished and load_run(run.out_dir).config.tokenizer == gpt2_like
    assert run.tokenizer.get_vocab_size() == size  # the run's own tokenizer, not a BPE trained on the corpus
    val = load_tokens(str(pile), "validation", tokenizer=gpt2_like, progress=False)
    if objective == "mlm":
        score = masked_perplexity(run.model, val, 32, max_tokens=512, specials=special_ids(run.tokenizer))
    else:
        score = perplexity_by_length(run.model, val, [32], max_tokens=512)
        assert (
            run_perplexity(run, [32], max_tokens=512).perplexity[0] == score.perplexity[0]
        )  # experiments use its tokens too
    assert score.perplexity[0] < size / 4  # it learnt from these tokens: far better than a uniform guess


def test_a_vocabulary_smaller_than_the_tokenizer_is_refused(tmp_path, pile, gpt2_like):
    size = read_tokenizer(gpt2_like).get_vocab_size()
    cfg = TrainConfig.from_preset(
        "smoke",
        corpus=str(pile),
        tokenizer=gpt2_like,
        vocab_size=size - 1,
        n_layer=1,
        d_model=32,
        n_head=2,
        seq_len=32,
        batch_size=4,
        max_steps=1,
        warmup_steps=1,
        eval_batches=1,
    )
    with pytest.raises(ConfigError, match=re.escape(f"{size - 1} is smaller than the {size} entries")):
        train(cfg, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_a_damaged_line_names_its_file_and_line(tmp_path, pile):
    (pile / "val.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(b'{"text": "fine"}\n{"txt": "typo"}\n'))
    with pytest.raises(ValueError, match=r"val\.jsonl\.zst, line 2: not a JSON object with a `text` field"):
        load_corpus(str(pile))
    assert not list((tmp_path / "data" / "corpora").glob("*/complete.json"))  # nothing half-built is kept


@pytest.mark.parametrize("text", ["12", "null", '["a", "list"]'])
def test_a_text_that_is_not_a_string_names_its_file_and_line(tmp_path, pile, text):
    (pile / "test.jsonl.zst").write_bytes(
        zstandard.ZstdCompressor().compress(f'{{"text": "fine"}}\n{{"text": {text}}}\n'.encode())
    )
    with pytest.raises(ValueError, match=rf"test\.jsonl\.zst, line 2: `text` is {re.escape(text[:5])}.*not a string"):
        load_corpus(str(pile))
    assert not list((tmp_path / "data" / "corpora").glob("*/complete.json"))


def test_an_empty_split_is_named(tmp_path, pile):
    (pile / "val.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(b'{"text": "  "}\n{"text": ""}\n'))
    with pytest.raises(
        ValueError, match=r"The validation split of local-pile-\w+ has no document.*give it at least one"
    ):
        load_corpus(str(pile))


@pytest.mark.parametrize(
    "name, damage, facts",
    [
        ("val.jsonl.gz", lambda good: good, ["val.jsonl.gz is a damaged or cut-short gzip file", "BadGzipFile"]),
        (
            "val.jsonl.gz",
            lambda good: gzip.compress(good)[:200],
            ["val.jsonl.gz is a damaged or cut-short gzip file", "EOFError"],
        ),
        (
            "val.jsonl.zst",
            lambda good: b"not zstandard at all\n",
            ["val.jsonl.zst is a damaged or cut-short zstandard file"],
        ),
        ("val.jsonl", lambda good: good + b'{"text": "caf\xe9"}\n', ["val.jsonl, line 21: not UTF-8", "iconv"]),
    ],
)
def test_a_file_that_cannot_be_read_names_itself_and_the_remedy(tmp_path, pile, name, damage, facts):
    good = zstandard.ZstdDecompressor().decompress((pile / "val.jsonl.zst").read_bytes())
    (pile / "val.jsonl.zst").unlink()
    (pile / name).write_bytes(damage(good))
    with pytest.raises(ValueError) as error:
        load_corpus(str(pile))
    message = str(error.value)
    assert all(fact in message for fact in facts), message
    assert "codec" not in message and not list((tmp_path / "data" / "corpora").glob("*/complete.json"))


@pytest.mark.slow
def test_the_experiments_run_on_it(tmp_path, pile, gpt2_like):
    """The paper's Pile setup through `posenc-reproduce`: corpus and tokenizer as overrides, every token load through
    that tokenizer."""
    size = read_tokenizer(gpt2_like).get_vocab_size()
    cli = [sys.executable, "-c", "import sys; from posenc_nb.reproduce import main; sys.exit(main())"]
    args = [
        "--profile",
        "smoke",
        "--only",
        "01",
        "--only",
        "07",
        "--out",
        str(tmp_path / "figures"),
        f"corpus={pile}",
        f"train_settings.tokenizer={gpt2_like}",
        f"train_settings.vocab_size={size}",
        "unigram_margin=null",
    ]  # four smoke steps do not beat a 20-word corpus' unigram baseline; the plumbing is tested here
    done = subprocess.run(
        [*cli, *args],
        cwd=REPO_ROOT,
        env=dict(os.environ, POSENC_RUNS_DIR=str(tmp_path / "runs")),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "figures" / "extrapolation.csv").exists() and (tmp_path / "figures" / "mlm_control.csv").exists()
    configs = [json.loads(meta.read_text())["config"] for meta in (tmp_path / "runs").glob("*/meta.json")]
    assert configs and all(cfg["tokenizer"] == gpt2_like and cfg["corpus"] == str(pile) for cfg in configs)
    assert {cfg["objective"] for cfg in configs} == {"clm", "mlm"}
    made_by_it = tokens_path(str(pile), "validation", tokenizer=gpt2_like).parent
    assert list((tmp_path / "data" / "tokens").iterdir()) == [made_by_it]  # every token file came from that tokenizer
    assert not list((tmp_path / "data" / "tokenizers").glob("*.json"))  # no BPE was trained on the corpus
