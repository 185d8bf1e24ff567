"""What a reader meets opening the notebooks in JupyterLab: every notebook in the file browser, and none marked modified
by being opened (JupyterLab writes its kernel's metadata into a notebook it opens; the notebooks store it already)."""

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("POSENC_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def load_kernel_metadata():
    spec = importlib.util.spec_from_file_location("kernel_metadata", ROOT / "nbs" / "_site" / "kernel_metadata.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_notebook_stores_the_metadata_jupyterlab_writes():
    meta = load_kernel_metadata()
    wanted = meta.lab_metadata()
    wrong = [
        str(p.relative_to(ROOT))
        for p in meta.notebooks()
        if {k: json.loads(p.read_text(encoding="utf-8"))["metadata"].get(k) for k in wanted} != wanted
    ]
    assert meta.notebooks() and not wrong, (
        f"{len(wrong)} notebooks lack the kernelspec and language_info JupyterLab "
        f"writes when it opens them (Python {sys.version.split()[0]} here), so "
        f"opening one marks it modified: run `make notebook-metadata`. {wrong[:5]}"
    )


def test_nbdev_clean_keeps_the_language_info(tmp_path, monkeypatch):
    from nbdev.clean import nbdev_clean

    notebook = tmp_path / "07_explore.ipynb"
    shutil.copy(ROOT / "nbs" / "07_explore.ipynb", notebook)
    monkeypatch.chdir(ROOT)  # nbdev_clean reads settings.ini from here
    nbdev_clean(fname=str(notebook))
    assert (
        json.loads(notebook.read_text())["metadata"].get("language_info")
        == load_kernel_metadata().lab_metadata()["language_info"]
    )


def test_the_readme_starts_jupyterlab_where_every_notebook_is_in_view():
    "Started in nbs/, JupyterLab's file browser cannot reach the executed copies in figures/notebooks/."
    commands = re.findall(r"^(?:\.venv/bin/)?jupyter lab\b.*$", (ROOT / "README.md").read_text(), re.M)
    assert commands and all(re.fullmatch(r"(?:\.venv/bin/)?jupyter lab(\s+#.*)?", c.strip()) for c in commands), (
        commands
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def jupyterlab(tmp_path):
    "JupyterLab serving `tmp_path` on 127.0.0.1, with its own settings, workspaces and project kernel: its base URL."
    from ipykernel.kernelspec import install

    port = free_port()
    home = tmp_path / "home"
    install(kernel_name="python3", display_name="python3", prefix=str(home))  # the kernel `make setup` installs
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTER_PATH": str(home / "share" / "jupyter"),
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            f"--port={port}",
            "--ip=127.0.0.1",
            "--ServerApp.token=",
            "--ServerApp.password=",
            "--ServerApp.disable_check_xsrf=True",
            f"--ServerApp.root_dir={tmp_path}",
            f"--LabApp.user_settings_dir={home / 'settings'}",
            f"--LabApp.workspaces_dir={home / 'workspaces'}",
            "--LabApp.expose_app_in_browser=True",
        ],  # window.jupyterapp: the test asks the notebook's model itself
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"
    for _ in range(240):
        try:
            urllib.request.urlopen(url + "api/status", timeout=2)
            break
        except OSError:
            assert server.poll() is None, f"JupyterLab exited with status {server.returncode}"
            time.sleep(0.5)
    yield url
    server.terminate()
    server.wait(timeout=30)


# Once the kernel has answered (kernel.info), JupyterLab writes its language_info into the notebook's metadata: a
# notebook storing anything else is then modified (model.dirty), as the tab's dot shows and closing it asks to save
DIRTY_ONCE_KERNEL_ANSWERED = """async () => {
    const panel = window.jupyterapp.shell.currentWidget;
    await panel.context.ready;
    await panel.sessionContext.ready;
    await panel.sessionContext.session.kernel.info;
    await new Promise(resolve => setTimeout(resolve, 1000));  // the metadata handlers chained on kernel.info run
    return panel.context.model.dirty;
}"""


def opened_in_jupyterlab(browser, url: str, name: str) -> bool:
    "Open notebook `name` in JupyterLab and let its kernel start and answer: whether the notebook is now modified."
    page = browser.new_page()
    page.goto(f"{url}lab/tree/{name}")
    page.wait_for_function(
        f"window.jupyterapp?.shell.currentWidget?.context?.path === {json.dumps(name)}", timeout=120_000
    )
    dirty = page.evaluate(DIRTY_ONCE_KERNEL_ANSWERED)
    page.close()
    return dirty


@pytest.mark.skipif(
    importlib.util.find_spec("playwright") is None or CHROMIUM is None,
    reason="needs Playwright and Chromium (`make docs-test` installs both)",
)
def test_a_notebook_opens_unmodified_in_jupyterlab(tmp_path, jupyterlab):
    "The committed chapter opens clean; the same notebook without its language_info would not (the test can fail)."
    from playwright.sync_api import sync_playwright

    shutil.copy(ROOT / "nbs" / "07_explore.ipynb", tmp_path / "committed.ipynb")
    stripped = json.loads((ROOT / "nbs" / "07_explore.ipynb").read_text())
    stripped["metadata"].pop("language_info", None)
    (tmp_path / "stripped.ipynb").write_text(json.dumps(stripped, indent=1))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            assert not opened_in_jupyterlab(browser, jupyterlab, "committed.ipynb"), "opening it marked it modified"
            assert opened_in_jupyterlab(browser, jupyterlab, "stripped.ipynb"), (
                "JupyterLab no longer writes language_info"
            )
        finally:
            browser.close()
