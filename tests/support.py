"""What the test files share: the tiny training recipe, the small model shape, and helpers that write, train or read a
run. Fixtures are in conftest.py."""

import re
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from posenc_nb.checkpoint import read_meta
from posenc_nb.claims import Claim
from posenc_nb.config import TrainConfig
from posenc_nb.model import ModelConfig
from posenc_nb.train import Trainer

POSENC_TRAIN = Path(sys.executable).parent / "posenc-train"
TINY = dict(
    model="cpu-tiny",
    n_layer=1,
    n_head=2,
    d_model=32,
    seq_len=32,
    batch_size=8,
    lr=3e-3,
    min_lr=3e-4,
    warmup_steps=2,
    max_steps=12,
    eval_interval=4,
    eval_batches=1,
    log_interval=1,
    checkpoint_interval=3,
)
SMALL = ModelConfig(vocab_size=97, n_layer=2, n_head=4, d_model=32, max_len=64)  # the model tests' shape, untrained


def write_config(path: Path, **keys) -> Path:
    path.write_text(yaml.safe_dump({**TINY, **keys}))
    return path


def weights(out_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(out_dir / read_meta(out_dir)["files"]["model"])


def partial_run(out: Path, steps: int = 3, **keys) -> TrainConfig:
    cfg = TrainConfig(**{**TINY, **keys})
    trainer = Trainer(cfg, out, progress=False)
    trainer.fit(steps)
    trainer.close()
    return cfg


# a claim as a notebook saves one, for the tests of records and of the controls that gate them
SAMPLE_CLAIM = Claim(
    "NoPos is competitive",
    "partly reproduces",
    "+0.05 ± 0.01 nats a byte",
    "+0.009 nats a byte",
    "within the paper's gap",
    "NoPos 8.6 against learned 8.2",
)


def refused(message: str):
    "A ValueError whose message holds `message` as it is written."
    return pytest.raises(ValueError, match=re.escape(message))
