"""The checks nbs/05b_claims' examples moved out (issue 58, item 5): a claim's record kept through `untested`, the
statuses and fields it refuses, and every damaged, missing or misplaced file of claims and findings, named with what to
do, checked here on the library in a scratch folder."""

from pathlib import Path

import pytest

from posenc_nb.claims import (
    CLAIMS_DIR,
    CLAIMS_FILE,
    FINDINGS_DIR,
    Claim,
    Findings,
    gather_claims,
    read_claims,
    read_findings,
    save_claims,
    write_claims_table,
)
from support import SAMPLE_CLAIM

claim = SAMPLE_CLAIM


def test_untested_keeps_the_numbers_and_every_reason():
    assert claim.untested("the positive arm failed").ours == claim.ours  # the number stays
    twice = claim.untested("a").untested("b")
    assert twice.details == "b; a (measured all the same: NoPos 8.6 against learned 8.2)"


def test_a_claim_refuses_an_unknown_status_and_an_empty_field():
    with pytest.raises(ValueError, match="is not one of"):
        Claim("x", "holds", "1", "2", "r", "d")
    with pytest.raises(ValueError, match=r"\['ours'\] must say something"):
        Claim("x", "reproduces", " ", "2", "r", "d")


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    "A folder where the table-sizes notebook saved one claim."
    save_claims([claim], tmp_path, "04_table2_model_sizes")
    write_claims_table(tmp_path)
    return tmp_path


def test_no_claims_folder_reads_as_no_claims(tmp_path):
    assert len(read_claims(tmp_path / "empty")) == 0
    assert write_claims_table(tmp_path / "empty") is None


@pytest.mark.parametrize(
    "damage, message",
    [
        (b"notebook,claim\nx,y\n", "lacks the columns"),
        (b"\xff\xfe\x00\x01", r"is not a CSV file of claims \(UnicodeDecodeError"),
    ],
)
def test_a_damaged_claims_table_is_named(saved, damage, message):
    (saved / CLAIMS_FILE).write_bytes(damage)
    with pytest.raises(ValueError, match=message):
        read_claims(saved)


def test_a_claims_table_missing_beside_the_notebooks_files_is_named(saved):
    (saved / CLAIMS_FILE).unlink()  # the notebooks' files are there: a table of no claims would be untrue
    with pytest.raises(ValueError, match="is missing, but"):
        read_claims(saved)


def test_the_file_of_a_renamed_notebook_is_named_and_left_out(saved):
    save_claims([claim], saved, "02_old_name")
    notebooks = ["01_extrapolation", "04_table2_model_sizes"]
    assert write_claims_table(saved, notebooks) == saved / CLAIMS_FILE
    assert read_claims(saved).notebook.tolist() == ["04_table2_model_sizes"]
    assert gather_claims(saved, notebooks)[1] == [saved / CLAIMS_DIR / "02_old_name.csv"]


def test_a_damaged_notebook_file_of_claims_is_named_with_what_to_do(saved):
    part = saved / CLAIMS_DIR / "04_table2_model_sizes.csv"
    other_notebook = part.read_text().replace("04_table2_model_sizes,", "01_extrapolation,").encode()
    for damage, said in [
        (b"notebook,claim\nx,y\n", "lacks the columns"),
        (b"\xff\xfe", "is not a CSV file of claims"),
        (
            other_notebook,
            "holds claims of notebook 01_extrapolation, though its name says they are notebook 04_table2_model_sizes's",
        ),
    ]:
        part.write_bytes(damage)
        with pytest.raises(RuntimeError) as refused:
            write_claims_table(saved, ["04_table2_model_sizes"])
        assert f"{part} {said}" in str(refused.value)
        assert "delete it, then rerun that notebook (`posenc-reproduce --only 04_table2_model_sizes`)" in str(
            refused.value
        )


def test_findings_not_run_yet_damaged_or_a_folder(tmp_path):
    found = Findings()
    found.add("ALiBi masked LM", "no use of order (bar 0.1)")
    found.save(tmp_path, "07_mlm_control")
    assert read_findings(tmp_path, "01_extrapolation") is None  # not run yet
    (tmp_path / FINDINGS_DIR / "07_mlm_control.csv").write_text("notebook,subject\nx,y\n")
    with pytest.raises(RuntimeError, match=r"is not a CSV file of findings \(KeyError"):
        read_findings(tmp_path, "07_mlm_control")
    (tmp_path / FINDINGS_DIR / "01_extrapolation.csv").mkdir()
    with pytest.raises(RuntimeError, match="is a folder where notebook 01_extrapolation's findings file belongs"):
        read_findings(tmp_path, "01_extrapolation")
