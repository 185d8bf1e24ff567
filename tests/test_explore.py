"The explorer's widget detection in a real kernel: what nbdev_test's in-process shell cannot show."
import nbformat

from posenc_nb.reproduce import run_notebook


def test_a_papermill_kernel_has_no_frontend_but_is_a_kernel(tmp_path, monkeypatch):
    "Under papermill the explorer must fall back to a figure; the same kernel started for a frontend must not."
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)  # as when run from a shell, not from a JupyterLab kernel
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from posenc_nb.explore import has_frontend\n"
        "assert not has_frontend(), 'papermill has no frontend to show widgets'\n"
        "assert has_frontend(environ={'JPY_SESSION_NAME': 'a.ipynb'}), 'a kernel a Jupyter server started would'"
    )])
    nbformat.write(nb, tmp_path / "detect.ipynb")
    run_notebook(tmp_path / "detect.ipynb", tmp_path / "detect-out.ipynb", {})
