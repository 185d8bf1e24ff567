"""The checks nbs/03c_checkpoint's examples moved out (issue 58, item 5): the chapter shows a checkpoint written,
read and refused once each; the rest of what a checkpoint records, and every record it refuses, is checked here."""

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from posenc_nb.checkpoint import (
    _dtype,
    check_same_config,
    load_optimizer,
    load_parent,
    load_run,
    load_weights,
    nonfinite_weight,
    parent_weights,
    pick_device,
    read_meta,
    remove_unreferenced,
    save_checkpoint,
)
from posenc_nb.checksums import CheckpointError
from posenc_nb.config import ConfigError, TrainConfig
from posenc_nb.files import sha256_file, write_json
from posenc_nb.model import TransformerLM


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture
def trained(tmp_path):
    "A one-layer model after one AdamW step, its checkpoint of step 10 in `tmp_path`."
    cfg = TrainConfig(n_layer=1)
    model = TransformerLM(cfg.model_config())
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randint(0, 100, (2, 8))).logits.sum().backward()
    optimizer.step()
    save_checkpoint(tmp_path, model, optimizer, cfg, step=10, tokens=160, finished=False)
    return tmp_path, cfg, model, optimizer


def test_meta_records_the_step_the_tokens_and_the_weights_sha256(trained):
    out, *_ = trained
    meta = read_meta(out)
    assert (meta["step"], meta["tokens"], meta["sha256"]["model"]) == (
        10,
        160,
        sha256_file(out / meta["files"]["model"]),
    )


def test_the_optimizer_state_comes_back(trained):
    out, cfg, model, optimizer = trained
    twin = TransformerLM(cfg.model_config())
    twin_opt = torch.optim.AdamW(twin.parameters())
    load_optimizer(twin_opt, out, read_meta(out))
    assert torch.equal(twin_opt.state_dict()["state"][0]["exp_avg"], optimizer.state_dict()["state"][0]["exp_avg"])


def test_a_checkpoint_of_another_config_is_refused_but_runtime_keys_may_change(trained):
    out, cfg, *_ = trained
    with pytest.raises(CheckpointError):
        check_same_config(read_meta(out), replace(cfg, lr=2e-3), out)
    check_same_config(read_meta(out), replace(cfg, device="cpu"), out)


def test_a_checkpoint_of_nonfinite_weights_is_refused(trained):
    out, cfg, model, optimizer = trained
    assert nonfinite_weight(model) is None
    with torch.no_grad():  # what an overflowing update leaves (older versions wrote a checkpoint of it)
        model.tok_emb.weight[0, 0] = float("inf")
    assert nonfinite_weight(model) == "tok_emb.weight"
    save_checkpoint(out, model, optimizer, cfg, step=15, tokens=240, finished=False)
    with pytest.raises(CheckpointError, match=r"holds non-finite weights \(inf or NaN in tok_emb.weight\)"):
        load_weights(TransformerLM(cfg.model_config()), out, read_meta(out))


def test_what_no_checkpoint_uses_is_removed(trained):
    out, *_ = trained
    before = snapshot(out)
    (out / ".model-0000020.safetensors.tmp4242").write_bytes(b"half")  # what a kill -9 mid-write leaves
    (out / "model-0000020.safetensors").write_bytes(b"never named by meta.json")
    remove_unreferenced(out)
    assert snapshot(out) == before


@pytest.mark.parametrize("content", [b'{"config": ', b'{"config": "\xff"}'])  # cut short; not UTF-8
def test_a_meta_json_that_is_no_json_is_refused(trained, content):
    out, *_ = trained
    (out / "meta.json").write_bytes(content)
    with pytest.raises(CheckpointError):
        read_meta(out)


def test_dtypes_by_name_and_a_misspelt_one_is_refused():
    assert (_dtype(None), _dtype("bfloat16"), _dtype(torch.float16)) == (torch.float32, torch.bfloat16, torch.float16)
    with pytest.raises(ValueError, match="bfloat16"):
        _dtype("bf16")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with a GPU has cuda")
def test_cuda_without_a_gpu_is_refused_with_the_cpu_offered():
    with pytest.raises(ConfigError, match="device=cpu"):
        pick_device("cuda")


def test_a_run_loads_on_the_cpu_in_float32_by_default(tmp_path):
    cfg = TrainConfig.from_preset("smoke")
    model = TransformerLM(cfg.model_config())
    save_checkpoint(tmp_path, model, torch.optim.AdamW(model.parameters()), cfg, step=3, tokens=96, finished=False)
    assert (load_run(tmp_path).device, load_run(tmp_path).dtype) == (torch.device("cpu"), torch.float32)
    run = load_run(tmp_path, device="cpu", dtype=torch.bfloat16)
    assert (run.device, run.dtype) == (torch.device("cpu"), torch.bfloat16)


def test_a_folder_that_is_no_run_is_refused(tmp_path):
    with pytest.raises(CheckpointError):
        load_run("no/such/run")
    (tmp_path / "notes.txt").write_text("not a run")
    with pytest.raises(CheckpointError, match="is not a run folder"):
        load_run(tmp_path)


@pytest.fixture
def parent(tmp_path):
    "A finished smoke RoPE run in `tmp_path/rope-run`, and its config."
    out, cfg = tmp_path / "rope-run", TrainConfig.from_preset("smoke", pos_encoding="rope")
    out.mkdir()
    model = TransformerLM(cfg.model_config())
    save_checkpoint(out, model, torch.optim.AdamW(model.parameters()), cfg, step=4, tokens=96, finished=True)
    return out, cfg, model


def test_a_parent_of_other_shapes_or_unfinished_or_missing_is_refused(parent):
    out, cfg, model = parent
    child = TransformerLM(replace(cfg, pos_encoding="nopos", parent=str(out)).model_config())
    wider = TransformerLM(replace(cfg, d_model=64).model_config())
    with pytest.raises(
        ConfigError, match=r"holds weights that do not fit this run's model \(size mismatch for tok_emb"
    ):
        load_parent(wider, str(out))
    save_checkpoint(out, model, torch.optim.AdamW(model.parameters()), cfg, step=2, tokens=48, finished=False)
    with pytest.raises(CheckpointError, match="stopped at step 2 of 4; finish it first"):
        load_parent(child, str(out))
    with pytest.raises(CheckpointError, match="no/such/run"):
        load_parent(child, "no/such/run")


def test_a_child_must_start_as_its_parent_did(parent):
    out, cfg, _ = parent
    child_cfg = replace(cfg, pos_encoding="nopos", parent=str(out))
    with pytest.raises(ConfigError, match="start_token: True, but the parent run"):
        parent_weights(replace(child_cfg, start_token=True))


@pytest.fixture
def finished(tmp_path):
    "A finished smoke run of 4 steps in `tmp_path/run`, and its meta.json."
    out, cfg = tmp_path / "run", TrainConfig.from_preset("smoke")
    out.mkdir()
    model = TransformerLM(cfg.model_config())
    save_checkpoint(out, model, torch.optim.AdamW(model.parameters()), cfg, step=4, tokens=128, finished=True)
    return out, read_meta(out)


def test_a_run_loads_at_its_step(finished):
    out, _ = finished
    assert load_run(out).step == 4


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda meta: dict(
                meta, step=3, files=dict(model="model-0000003.safetensors", optimizer="optimizer-0000003.pt")
            ),
            "finished: True at step 3 of max_steps 4",
        ),
        (lambda meta: {k: v for k, v in meta.items() if k != "sha256"}, "sha256: missing"),
    ],
)
def test_a_record_that_contradicts_itself_is_refused(finished, edit, message):
    out, meta = finished
    write_json(out / "meta.json", edit(meta))
    with pytest.raises(CheckpointError, match=message):
        read_meta(out)


def test_the_config_hash_named_is_the_one_recorded(finished):
    out, meta = finished
    write_json(out / "meta.json", dict(meta, config=dict(meta["config"], lr=1.0)))
    with pytest.raises(CheckpointError) as error:
        read_meta(out)
    assert f"config_hash: {meta['config_hash']!r}" in str(error.value)


def test_a_run_whose_folder_moved_on_to_another_checkpoint_says_so(tmp_path):
    cfg = TrainConfig.from_preset("smoke")
    for name in "ab":
        (tmp_path / name).mkdir()
        model = TransformerLM(cfg.model_config())
        save_checkpoint(
            tmp_path / name, model, torch.optim.AdamW(model.parameters()), cfg, step=3, tokens=96, finished=False
        )
    runs = [load_run(tmp_path / name) for name in "ab"]
    model = runs[1].model
    save_checkpoint(
        runs[0].out_dir, model, torch.optim.AdamW(model.parameters()), cfg, step=4, tokens=128, finished=True
    )
    with pytest.raises(CheckpointError, match="no longer holds step 3"):
        runs[0].model
    assert load_run(runs[0].out_dir).step == 4
