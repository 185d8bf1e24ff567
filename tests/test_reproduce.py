"""End to end: the `smoke` profile through papermill, the driver's failure modes, and the experiment notebooks'
hygiene."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import torch
from nbdev.test import _keep_file

from posenc_nb.checkpoint import read_meta
from posenc_nb.claims import FINDINGS_DIR, read_claims
from posenc_nb.experiments import EXPERIMENTS
from posenc_nb.config import TrainConfig
from posenc_nb.tables import OUTPUT_TABLES, table_problem
from posenc_nb.position_classifier import ProbeTraining, middle_mad, random_mad
from posenc_nb.parameters import PROFILES
from posenc_nb.files import committed_figures
from posenc_nb.encodings import ENCODINGS as REGISTERED
from posenc_nb.grids import budget_steps_of
from posenc_nb.report import readme_blocks, readme_files
from posenc_nb.parameter_cells import notebook_parameters, parameters_source
from posenc_nb.reproduce import EXPERIMENTS_DIR, ReproductionError, experiment_notebooks, reproduce, run_notebook
from posenc_nb.plan import training_plan
from posenc_nb.tasks import TASKS
from posenc_nb.files import REPO_ROOT
from posenc_nb.train import train

from support import weights

CLI = [sys.executable, "-c", "import sys; from posenc_nb.reproduce import main; sys.exit(main())"]
SMOKE = PROFILES["smoke"]
ENCODINGS = SMOKE["encodings"]

# Every figure (PNG + SVG) the experiments write, as their entries declare them (their tables: OUTPUT_TABLES).
FIGURES = [figure for entry in EXPERIMENTS.values() for figure in entry.figures]


def run_cli(*args, runs_dir: Path, timeout=900) -> subprocess.CompletedProcess:
    "posenc-reproduce in a fresh process, its models and executed notebooks under `runs_dir`."
    env = dict(os.environ, POSENC_RUNS_DIR=str(runs_dir))
    return subprocess.run([*CLI, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The whole smoke profile, once, from an empty runs folder: (completed process, figures folder, runs folder,
    seconds)."""
    root = tmp_path_factory.mktemp("smoke")
    start = time.time()
    done = run_cli("--profile", "smoke", "--out", str(root / "figures"), runs_dir=root / "runs")
    return done, root / "figures", root / "runs", time.time() - start


@pytest.mark.slow
def test_smoke_runs_every_notebook(smoke):
    done, figures, _, seconds = smoke
    assert done.returncode == 0, done.stderr[-3000:]
    names = [p.stem for p in experiment_notebooks()]
    progress = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert [line.split("] ")[1].split(":")[0] for line in progress] == names  # one line per notebook, in order
    assert all(" s (total " in line for line in progress)
    print(f"smoke profile: {len(names)} notebooks in {seconds:.0f} s")
    for name in names:  # the executed copies hold no error
        executed = nbformat.read(figures / "notebooks" / f"{name}.ipynb", as_version=4)
        errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        assert not errors, f"{name}: {errors[0]['ename']}: {errors[0]['evalue']}"


@pytest.mark.slow
def test_smoke_writes_every_figure_and_table(smoke):
    _, figures, _, _ = smoke
    for name in FIGURES:
        png, svg = figures / f"{name}.png", figures / f"{name}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000, name
        assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text(), name
    for name in OUTPUT_TABLES:  # each as declared once, in posenc_nb.outputs
        assert (problem := table_problem(pd.read_csv(figures / name), name)) is None, f"{name} {problem}"


@pytest.mark.slow
def test_smoke_tables_cover_what_the_profile_asks(smoke):
    _, figures, _, _ = smoke
    train_len = SMOKE["train_settings"]["seq_len"]
    ext = pd.read_csv(figures / "extrapolation.csv")
    assert set(ext.encoding) == set(ENCODINGS) and set(ext.seed) == set(SMOKE["seeds"])
    assert set(ext.protocol) == {"nonoverlapping", "sliding"}  # the smoke profile scores both
    assert set(ext.context_length) == set(SMOKE["eval_lengths"])
    learned = ext[ext.encoding == "learned"]
    assert learned[learned.context_length > train_len].perplexity.isna().all()  # not applicable, not faked
    assert learned[learned.context_length <= train_len].perplexity.notna().all()
    assert ext[ext.encoding != "learned"].perplexity.notna().all()

    assert set(pd.read_csv(figures / "table1_corpora.csv").corpus) == set(SMOKE["corpora"])
    assert set(pd.read_csv(figures / "table2_model_sizes.csv").variant) == set(SMOKE["model_sizes"])
    assert set(pd.read_csv(figures / "table3_train_lengths.csv").seq_len) == set(SMOKE["train_lengths"])

    probe = pd.read_csv(figures / "probe_mad.csv")
    n_layer = SMOKE["train_settings"]["n_layer"]
    assert set(probe.layer) == set(range(n_layer + 1)) and set(probe.encoding) == set(ENCODINGS)
    assert probe.random_mad.round(6).eq(round(random_mad(train_len), 6)).all()
    assert probe.middle_mad.round(6).eq(round(middle_mad(train_len), 6)).all() and set(probe.probe) == {"mlp", "linear"}
    assert set(probe[~probe.trained].encoding) == {"nopos"} and set(probe[~probe.trained].seed) == set(
        SMOKE["seeds"]
    )  # the control
    cap = ProbeTraining(epochs=SMOKE["probe_epochs"]).max_epochs
    assert probe.epochs_run.between(SMOKE["probe_epochs"], cap).all()  # the first passes, at most the cap
    assert not probe.still_improving.any()  # each stopped because its held-out loss settled, none at the cap
    assert (probe.mad_epoch <= probe.epochs_run).all() and (probe.median_mad_epoch <= probe.epochs_run).all()

    mlm = pd.read_csv(figures / "mlm_control.csv")
    assert {(e, o) for e, o in zip(mlm.encoding, mlm.objective)} == {
        (e, o) for e in SMOKE["mlm_encodings"] for o in ("clm", "mlm")
    }

    tasks = pd.read_csv(figures / "length_generalisation.csv")  # every task model at every length, 2 to 40
    assert {(t, e, s) for t, e, s in zip(tasks.task, tasks.encoding, tasks.seed)} == {
        (t, e, s) for t in SMOKE["tasks"] for e in SMOKE["task_encodings"] for s in SMOKE["seeds"]
    }
    assert set(tasks.length) == set(range(2, 41)) and tasks.n.eq(SMOKE["task_examples"]).all()
    link = pd.read_csv(figures / "length_generalisation_link.csv")  # repeat-task NoPos, every test length and seed
    assert set(link.encoding) == {"nopos"} and len(link) == 20 * len(SMOKE["seeds"])

    gaps = pd.read_csv(figures / "attention_permutation_gap.csv").set_index("attention")
    assert (
        gaps.permutation_gap["bidirectional"] < 1e-4 < gaps.permutation_gap["causal"]
    )  # the mask changes which keys a query sees
    assert (
        gaps.shared_keys_gap["causal"] < 1e-5
    )  # over the keys both orders show a query, one block without positions is blind


@pytest.mark.slow
def test_smoke_reuses_trained_models(smoke):
    "The notebooks after the first retrain nothing they share: one run folder per distinct config."
    _, _, runs, _ = smoke
    s = SMOKE
    one_seed = len(s["table_seeds"])  # the tables and the encodings beyond the paper; their core rows are the core runs
    # the core models; the masked LMs: seed 0 of each arm, every seed of NoPos (four-step arms ignore order: no more
    # seeds)
    distinct = (
        len(ENCODINGS) * len(s["seeds"])
        + len(s["mlm_encodings"])
        + len(s["seeds"])
        - 1
        + (len(s["corpora"]) - 1) * len(s["table_encodings"]) * one_seed  # the other corpora
        # the other sizes, on the same bytes (`table_seeds`) and on the same bytes a parameter (`size_seeds`)
        + (len(s["model_sizes"]) - 1) * len(s["size_encodings"]) * (one_seed + len(s["size_seeds"]))
        + (len(s["train_lengths"]) - 1) * len(s["table_encodings"]) * one_seed  # the other lengths
        + len([e for e in s["beyond_encodings"] or REGISTERED if e not in ENCODINGS]) * one_seed  # beyond the paper
        + len(s["tasks"]) * len(s["task_encodings"]) * len(s["seeds"])  # the synthetic-task models
        + len(s["start_token_encodings"]) * len(s["seeds"])  # the start-token arm at the core budget
        + (len(budget_steps_of(s["train_settings"], s["budget_steps"])) - 1)
        * (2 * len(s["seeds"]))  # NoPos and learned every seed at each other budget (14)
        # positions as practised now, on two layers (every 2nd is the last: one hybrid): RoPE, the hybrid and NoPos
        # every seed, partial RoPE twice and the temperature the first, ALiBi the first; on the repeat task the same
        # but NoPos and ALiBi (the synthetic-task notebook's); a DroPE child of each RoPE model, on text and on the task
        + 3 * len(s["seeds"])
        + 3
        + 1
        + 2 * len(s["seeds"])
        + 3
        + 2 * len(s["seeds"])
    )
    assert len([d for d in runs.iterdir() if (d / "meta.json").exists()]) == distinct


@pytest.mark.slow
def test_smoke_trains_exactly_the_plan(smoke):
    """The run folders the notebooks leave are the plan's (`posenc-reproduce plan`), but for corpora that need the
    network."""
    _, _, runs, _ = smoke
    plan = training_plan("smoke")
    online = plan.corpus.isin(SMOKE["online_corpora"])
    # the plan lists every seed of every masked arm; an arm order-blind at seed 0 trains no more (here: all but NoPos)
    untried = (plan.objective == "mlm") & (plan.encoding != "nopos") & (plan.seed != SMOKE["seeds"][0])
    trained = {d.name for d in runs.iterdir() if (d / "meta.json").exists()}
    assert trained == set(plan.run[~online & ~untried]) | (trained & set(plan.run[online])), sorted(
        trained ^ set(plan.run)
    )


@pytest.mark.slow
def test_smoke_saves_every_claim_and_renders_every_readme_block(smoke):
    """The run gathers the notebooks' claims into claims.csv (and each notebook saves its findings), every one gated
    by a positive arm (four-step smoke models fail it, so every claim is not tested, naming the check; a task the
    profile does not train says so), and writes a README whose every block comes from this run."""
    _, figures, _, _ = smoke
    claims = read_claims(figures)
    assert set(claims.notebook) == {name for name, entry in EXPERIMENTS.items() if entry.claims}
    untrained = claims.claim.str.contains("|".join(t for t in TASKS if t not in SMOKE["tasks"])) & (
        claims.notebook == "11_length_generalisation"
    )
    assert claims[untrained].details.str.contains(
        "not among the tasks this run trains"
    ).all() and untrained.sum() == len(TASKS) - len(SMOKE["tasks"])
    assert (claims.status == "not tested").all() and claims[~untrained].details.str.contains(
        "the positive arm"
    ).all(), claims.details.tolist()
    readme = readme_blocks((figures / "README.md").read_text())  # the README, with the results page it links to added
    assert set(readme) == {name for page in readme_files() for name in readme_blocks(page.read_text())}
    for name, body in readme.items():  # a table or a quote from this run, never a note of a missing or older file
        assert body.strip() and not re.search(r"is not there yet|was written before|No findings of", body), (name, body)
    notebooks = {nb.stem for nb in (REPO_ROOT / "nbs" / "experiments").glob("[0-9]*.ipynb")}
    assert {
        p.stem for p in (figures / FINDINGS_DIR).glob("*.csv")
    } == notebooks  # every notebook's findings, as records
    assert readme["claims"].count("| not tested |") == len(claims)


@pytest.mark.slow
def test_executed_notebooks_name_no_machine_path(smoke):
    "The executed copies show results, not the runner's folders: no absolute path (the output folder is relative)."
    _, figures, runs, _ = smoke
    for notebook in sorted((figures / "notebooks").glob("*.ipynb")):
        text = notebook.read_text()
        absolute = re.search(r"(?<![\w.])/(?:tmp|work|home|root|usr)/\S*", text)
        assert not absolute and str(REPO_ROOT) not in text and str(runs) not in text, f"{notebook.name}: {absolute}"


@pytest.mark.slow
def test_torchrun_launcher_trains_first_and_the_notebook_only_analyses(tmp_path):
    """--launcher torchrun: posenc-train under torchrun (2 gloo processes) trains the notebook's runs, then the
    notebook runs."""
    done = run_cli(
        "--profile",
        "smoke",
        "--only",
        "02",
        "--launcher",
        "torchrun",
        "--nproc-per-node",
        "2",
        "--out",
        str(tmp_path / "figures"),
        runs_dir=tmp_path / "runs",
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    trained = [line for line in out.splitlines() if line.startswith("[train ")]
    assert len(trained) == 2 and all("torchrun on 2 process(es)" in line for line in trained), (
        out
    )  # causal and masked NoPos
    assert out.count("metrics in") == 2, out  # each printed by posenc-train's rank 0 as it finished
    assert out.index("[train 2/2]") < out.index("[1/1] 02_attention_heatmaps: done"), out
    assert (tmp_path / "figures" / "attention_heatmaps.csv").exists()
    assert all(
        json.loads((d / "meta.json").read_text())["finished"] for d in (tmp_path / "runs").glob("*-*-*") if d.is_dir()
    )


def test_failing_notebook_stops_the_run_and_names_notebook_and_cell(tmp_path):
    """A notebook failing part-way: exit status 1, the notebook, the cell and the error on stderr, later notebooks
    not run."""
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    for name, source in [
        ("01_first", "written = Path(out_dir, 'first.txt').write_text('ok')"),
        ("02_broken", "corpus_tokens = len(corpus) // 0"),
        ("03_never", "Path(out_dir, 'never.txt').write_text('ran')"),
    ]:
        nb = nbformat.v4.new_notebook(
            metadata={"kernelspec": {"name": "python3", "display_name": "python3", "language": "python"}}
        )
        nb.cells = [
            nbformat.v4.new_code_cell(
                'profile = "cpu"\nout_dir = "."\ncorpus = "shakespeare"', metadata={"tags": ["parameters"]}
            ),
            nbformat.v4.new_code_cell("from pathlib import Path\nPath(out_dir).mkdir(parents=True, exist_ok=True)"),
            nbformat.v4.new_code_cell(source),
        ]
        nbformat.write(nb, experiments / f"{name}.ipynb")
    out = tmp_path / "figures"
    done = run_cli(
        "--profile", "smoke", "--out", str(out), "--experiments-dir", str(experiments), runs_dir=tmp_path / "runs"
    )
    assert done.returncode == 1
    assert "02_broken failed at cell 3 (`corpus_tokens = len(corpus) // 0`): ZeroDivisionError" in done.stderr
    assert str(out / "notebooks" / "02_broken.failed.ipynb") in done.stderr  # where the traceback is
    assert (out / "first.txt").exists() and not (out / "never.txt").exists()
    assert sorted(p.name for p in out.iterdir()) == [
        ".posenc-reproduce.run.json",  # what the run asked and published: the same command goes on after 01_first
        "first.txt",
        "notebooks",
        "reproduce_timings.csv",
    ]  # the failed one: nothing
    assert list(pd.read_csv(out / "reproduce_timings.csv").notebook) == ["01_first"]  # the time of what ran, kept
    assert sorted(p.name for p in (out / "notebooks").iterdir()) == ["01_first.ipynb", "02_broken.failed.ipynb"]


def test_real_notebook_checks_its_parameters_first(tmp_path):
    "Run by hand (papermill), a real experiment notebook refuses a bad parameter in its first working cell, naming it."
    notebook = EXPERIMENTS_DIR / "08_appendix.ipynb"
    params = dict(
        notebook_parameters(notebook, dict(SMOKE, profile="smoke", out_dir=str(tmp_path / "f"))),
        corpus="no-such-corpus",
    )
    with pytest.raises(ReproductionError) as error:
        run_notebook(notebook, tmp_path / "executed.ipynb", params)
    assert error.value.cell == 3 and "corpus" in str(error.value) and "no-such-corpus" in str(error.value)
    assert not (tmp_path / "f").exists()


def test_real_notebook_refuses_an_unknown_parameter(tmp_path):
    "papermill run by hand with a misspelt key (which papermill itself only warns about) is refused, naming the key."
    notebook = EXPERIMENTS_DIR / "08_appendix.ipynb"
    params = dict(
        notebook_parameters(notebook, dict(SMOKE, profile="smoke", out_dir=str(tmp_path / "f"))), eval_tokenz=64
    )
    with pytest.raises(ReproductionError) as error:
        run_notebook(notebook, tmp_path / "executed.ipynb", params)
    assert error.value.cell == 3 and "eval_tokenz" in str(error.value) and "eval_tokens" in str(error.value), (
        error.value
    )
    assert not (tmp_path / "f").exists()


def test_hand_run_never_overwrites_the_committed_figures(tmp_path):
    """The README's papermill example aimed at the committed folder with other eval_lengths: refused before anything
    runs."""
    before = {p.name: p.stat().st_mtime_ns for p in committed_figures().iterdir()}
    notebook = EXPERIMENTS_DIR / "01_extrapolation.ipynb"
    with pytest.raises(ReproductionError) as error:
        run_notebook(
            notebook, tmp_path / "executed.ipynb", {"eval_lengths": [64, 128, 256, 512]}
        )  # out_dir: ../../figures
    assert error.value.cell == 3 and "out_dir" in str(error.value) and "eval_lengths" in str(error.value)
    assert {p.name: p.stat().st_mtime_ns for p in committed_figures().iterdir()} == before


def test_driver_refuses_other_results_in_the_committed_folder(tmp_path):
    before = {p.name: p.stat().st_mtime_ns for p in committed_figures().iterdir()}
    for args in (["--profile", "smoke", "--out", str(committed_figures())], ["--only", "08", "seeds=[0,1]"]):
        done = run_cli(*args, runs_dir=tmp_path / "runs", timeout=120)
        assert done.returncode == 2 and "--replace" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert {p.name: p.stat().st_mtime_ns for p in committed_figures().iterdir()} == before
    assert not (tmp_path / "runs").exists()  # nothing trained


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU trains bfloat16 natively: nothing is checked")
def test_a_cpu_that_emulates_bfloat16_runs_nothing(tmp_path, monkeypatch):
    """The cpu profile trains in bfloat16: on a CPU that emulates it (one such host measured 1.3 GFLOP/s against
    float32's 83.3, a core step of 1.5 s), a part is refused with both peaks and what to do, before anything runs."""
    peaks = {torch.bfloat16: 1.3, torch.float32: 83.3}
    monkeypatch.setattr("posenc_nb.plan.matmul_peak_flops", lambda *_, dtype, **__: peaks[dtype] * 1e9)
    monkeypatch.setenv("POSENC_RUNS_DIR", str(tmp_path / "runs"))
    out = tmp_path / "figures"
    with pytest.raises(RuntimeError) as error:
        reproduce("cpu", part=["beyond"], out_dir=out, log=lambda *_: None)
    message = str(error.value)
    assert "at 1.3 GFLOP/s against float32's 83.3" in message and "Nothing ran." in message, message
    assert "avx512_bf16 or amx_bf16" in message and "train_settings.dtype=float32" in message, message
    assert not (tmp_path / "runs").exists() and not (out.exists() and any(out.iterdir()))


@pytest.mark.parametrize(
    "args, status, message",
    [
        (["--profile", "laptop"], 2, "invalid choice: 'laptop'"),
        (
            ["--only", "99_nothing"],
            2,
            "No experiment notebook named '99_nothing'; choose from ['00_positive_arm', '01_extrapolation'",
        ),
        (["seeds"], 2, "seeds: expected key=value"),
        (["eval_lenghts=[0]"], 2, "eval_lenghts: not a profile parameter (did you mean 'eval_lengths'?)"),
        (["eval_lengths=[64, 256]"], 2, "eval_lengths: [64, 256] omit the training length 128"),
        (["--nproc-per-node", "2"], 2, "--nproc-per-node needs --launcher torchrun"),
        (
            ["--profile", "smoke", "--launcher", "torchrun", "--nproc-per-node", "3"],
            2,
            "batch_size",
        ),  # smoke batches of 4 do not split over 3 processes: refused before anything trains
    ],
)
def test_cli_bad_input(tmp_path, args, status, message):
    done = run_cli(*args, runs_dir=tmp_path / "runs", timeout=120)
    assert done.returncode == status and message in done.stderr, done.stderr


def test_parameters_cells_hold_the_cpu_profile():
    """Opened in JupyterLab, every experiment notebook runs the main job; and every profile sets each parameter it
    declares."""
    for notebook in experiment_notebooks():
        cell = next(
            c for c in nbformat.read(notebook, as_version=4).cells if "parameters" in c.metadata.get("tags", [])
        )
        assert cell.source == parameters_source(notebook, "cpu"), (
            f"{notebook.name}: rerun posenc_nb.parameter_cells.write_parameters"
        )
        for profile, params in PROFILES.items():
            notebook_parameters(notebook, dict(params, profile=profile, out_dir="."))


def test_nbdev_skips_the_experiment_notebooks():
    "A .notest file beside them keeps nbdev_test from running them at full size (no front matter shows in JupyterLab)."
    for notebook in experiment_notebooks():
        assert not _keep_file(notebook, ".notest"), notebook.name
        assert "skip_exec" not in nbformat.read(notebook, as_version=4).cells[0].source, notebook.name


def test_no_tracked_notebook_carries_run_metadata():
    "Executed copies live under runs/; the notebooks in nbs/ stay clean of papermill's metadata and outputs."
    for notebook in sorted((REPO_ROOT / "nbs").rglob("*.ipynb")):
        nb = json.loads(notebook.read_text())
        assert "papermill" not in nb["metadata"], notebook
        assert not any("papermill" in c.get("metadata", {}) for c in nb["cells"]), notebook
    for notebook in experiment_notebooks():
        assert not any(c.get("outputs") for c in nbformat.read(notebook, as_version=4).cells), notebook


@pytest.mark.parametrize("threads", [1, 2])
def test_the_same_config_and_thread_count_give_the_same_weights_bit_for_bit(tmp_path, threads):
    """Trained twice on the same number of threads, the tiny preset gives the same weights to the last bit, and
    meta.json records that number (another count may differ in the last bits: reusing such a run is said once)."""
    cfg, before = TrainConfig.from_preset("tiny", max_steps=8), torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        runs = [train(cfg, out_dir=tmp_path / f"run-{i}", progress=False) for i in range(2)]
    finally:
        torch.set_num_threads(before)
    assert [read_meta(run.out_dir)["threads"] for run in runs] == [threads, threads]
    first, second = (weights(run.out_dir) for run in runs)
    assert first.keys() == second.keys() and all(torch.equal(first[name], second[name]) for name in first)
