"""The checks nbs/02h_parameter_cells' example moved out (issue 58, item 5): a notebook's parameters refused when one
is missing, and a damaged notebook named with what to do, checked here on the library."""

import nbformat
import pytest

from posenc_nb.parameter_cells import notebook_parameters

PYTHON = {"kernelspec": {"name": "python3", "display_name": "python3", "language": "python"}}


@pytest.fixture
def toy(tmp_path):
    "A notebook whose parameters cell declares a profile, an output folder and a number of tokens."
    path = tmp_path / "01_toy.ipynb"
    parameters = nbformat.v4.new_code_cell(
        'profile = "cpu"\nout_dir = "out"\neval_tokens = 3', metadata={"tags": ["parameters"]}
    )
    nbformat.write(nbformat.v4.new_notebook(cells=[parameters], metadata=PYTHON), path)
    return path


def test_a_parameter_the_notebook_declares_must_be_given(toy):
    with pytest.raises(ValueError, match="eval_tokens"):
        notebook_parameters(toy, {"profile": "smoke", "out_dir": "x"})


def test_a_damaged_notebook_is_named(toy, tmp_path):
    cut = tmp_path / "cut" / "01_cut.ipynb"
    cut.parent.mkdir()
    cut.write_text(toy.read_text()[:100])
    with pytest.raises(RuntimeError) as refused:
        notebook_parameters(cut, {})
    assert f"{cut} is not a readable notebook (NotJSONError" in str(refused.value)
