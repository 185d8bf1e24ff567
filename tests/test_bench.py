"The posenc-bench command line: bad arguments and a tiny end-to-end run."
import subprocess
import sys

import pytest

from posenc_nb.bench import main


def test_unknown_encoding_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--encodings", "t5"])
    assert exit_info.value.code == 2
    assert "invalid choice: 't5'" in capsys.readouterr().err


def test_tiny_run_writes_the_report(tmp_path):
    out = tmp_path / "bench.md"
    args = ["--preset", "cpu-tiny", "--batch-size", "2", "--seq-len", "16", "--steps", "1", "--lengths", "16", "32",
            "--repeats", "1", "--encodings", "nopos", "learned", "alibi", "--out", str(out)]
    done = subprocess.run([sys.executable, "-c", "from posenc_nb.bench import main; main()", *args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = out.read_text()
    assert report.strip() == done.stdout.strip()
    assert "| 32 | alibi |" in report and "| 32 | learned |" not in report  # learned stops at its max_len
    assert "training step within 10% of NoPos" in report and "ALiBi at T=32 within 2x NoPos" in report
