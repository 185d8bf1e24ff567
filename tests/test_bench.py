"The posenc-bench command line: bad arguments and tiny end-to-end runs of its sections."

import subprocess
import sys
from unittest import mock

import pytest

from posenc_nb import bench, step_speed
from posenc_nb.bench import main


def posenc_bench(*args: str) -> str:
    """The report of a `posenc-bench` run (in its own process, as users run it), after checking it printed what it
    wrote. The runs below time their peaks on 256 x 256 products: 2048 x 2048 ones take a minute each in bfloat16 on a
    CPU that emulates it."""
    out = args[args.index("--out") + 1]
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from posenc_nb.bench import main; sys.exit(main())", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = open(out).read()
    assert report.strip() == done.stdout.strip()
    return report


@pytest.mark.parametrize(
    "arg, key",
    [
        ("encodings=[t6]", "encodings"),
        ("sections=[speed]", "sections"),
        ("train_profile=tiny", "train_profile"),
        ("stepz=3", "stepz"),
        ("steps", "steps"),
        ("steps=abc", "steps"),
        ("lengths=[0]", "lengths"),
        ("lengths=[-8]", "lengths"),
        ("lengths=[abc]", "lengths"),
        ("lengths=[1.5]", "lengths"),
        ("lengths=[]", "lengths"),
        ("encodings=[]", "encodings"),
        ("sections=[]", "sections"),
        ("steps=0", "steps"),
        ("preset=cpu-huge", "preset"),
    ],
)
def test_bad_argument_is_refused_naming_the_key(capsys, arg, key):
    """Before: a length of 0 gave a row of NaN ratios; negative, string or float lengths a child process's traceback;
    empty lists and steps=0 an "unexpected KeyError" or "min() arg is an empty sequence", after minutes of work."""
    with mock.patch.object(step_speed, "matmul_peak_flops", side_effect=AssertionError("the benchmark started")):
        assert main([arg]) == 2
    err = capsys.readouterr().err
    assert f"{key}: " in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    "out, said",
    [
        ("/proc/bench.md", "/proc/bench.md cannot be written: /proc takes no new files"),
        (".", ". cannot be written: it is a folder"),
    ],
)
def test_an_out_that_cannot_be_written_is_refused_before_the_benchmark(capsys, out, said):
    "Before: reported only after the whole benchmark had run."
    with mock.patch.object(bench, "run_benchmark", autospec=True, return_value="report") as run:
        assert main(["sections=[eval]", "--out", out]) == 2
    run.assert_not_called()
    err = capsys.readouterr().err
    assert f"--out: {said}" in err and "--out bench.md" in err, err


@pytest.mark.slow
def test_tiny_run_writes_the_report(tmp_path):
    report = posenc_bench(
        "sections=[train, eval]",
        "preset=cpu-tiny",
        "batch_size=2",
        "seq_len=16",
        "steps=1",
        "lengths=[16, 32]",
        "repeats=1",
        "eval_rounds=1",
        "matmul_size=256",
        "encodings=[nopos, learned, alibi, t5]",
        "--out",
        str(tmp_path / "bench.md"),
    )
    assert (
        "| 32 | alibi |" in report and "| 32 | t5 |" in report and "| 32 | learned |" not in report
    )  # learned stops at max_len
    assert "training step within 10% of NoPos" in report and "training step at least 0.85x NoPos" in report
    assert "ALiBi at T=32 within 1.1x NoPos's time and 1.1x its peak memory" in report
    assert "T5 bias at T=32 within 3x NoPos's time and 2x its peak memory" in report
    assert "compiled" not in report  # torch.compile is measured only when asked for
    assert "### Trainer" not in report and "trainer bookkeeping" not in report  # a section not asked for


@pytest.mark.slow
def test_trainer_section_alone(tmp_path):
    report = posenc_bench(
        "sections=[trainer]",
        "train_profile=smoke",
        "steps=2",
        "rounds=2",
        "matmul_size=256",
        "--out",
        str(tmp_path / "bench.md"),
    )
    assert "### Trainer on the smoke profile's runs" in report and "| smoke | cpu-tiny |" in report
    assert "trainer bookkeeping under 5% of a step" in report
    assert "### Training step per encoding" not in report and "### Forward pass" not in report


@pytest.mark.slow
def test_compiled_training_step_on_request(tmp_path):
    """compile_backend times each training step compiled as well (the `eager` backend: the plumbing without code
    generation)."""
    report = posenc_bench(
        "sections=[train]",
        "preset=cpu-tiny",
        "batch_size=2",
        "seq_len=16",
        "steps=1",
        "encodings=[nopos, fire]",
        "compile_backend=eager",
        "matmul_size=256",
        "--out",
        str(tmp_path / "bench.md"),
    )
    assert "compiled with torch.compile(backend='eager')" in report and "compiled_speedup" in report
    assert "| fire |" in report


def test_key_value_anywhere_among_the_options(tmp_path):
    "`posenc-bench sections=[eval] --out FILE repeats=1`: a key=value after an option is an override, not an error."
    from unittest import mock

    from posenc_nb import bench

    with mock.patch.object(bench, "run_benchmark", autospec=True, return_value="report") as run:
        assert main(["sections=[eval]", "--out", str(tmp_path / "r.md"), "repeats=1", "lengths=[64]"]) == 0
    run.assert_called_once_with(sections=["eval"], repeats=1, lengths=[64])
    assert (tmp_path / "r.md").read_text() == "report\n"
