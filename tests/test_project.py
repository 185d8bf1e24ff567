"The project's own wiring: one list of requirements, described the same way for pip and for conda."

import configparser
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement):
    "The distribution name of a requirement string, normalised ('Foo_Bar>=1' -> 'foo-bar')."
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _settings():
    cfg = configparser.ConfigParser(delimiters=["="])
    cfg.read(ROOT / "settings.ini")
    return cfg["DEFAULT"]


def _conda_pip_requirements():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return [r for r in pip_section if not r.startswith("-e")]


def test_environment_yml_names_the_same_packages_as_settings_ini():
    settings = _settings()
    declared = {_name(r) for r in (settings["requirements"] + " " + settings["dev_requirements"]).split()}
    conda = {_name(r) for r in _conda_pip_requirements()}
    assert declared == conda, f"only in settings.ini: {declared - conda}; only in environment.yml: {conda - declared}"


def test_environment_yml_installs_the_project_and_python_311():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert "-e ." in pip_section


def test_torch_is_pinned_for_the_cpu_wheel_in_every_installer():
    "A bare torch requirement on a machine without torch pulls a multi-GB CUDA build: the installers pin it."
    assert "torch==2.13.0" in (ROOT / "Makefile").read_text()
    assert "torch==2.13.0" in _conda_pip_requirements()


def test_nbdev_keeps_papermill_tags_and_stays_on_2x():
    settings = _settings()
    assert settings["allowed_cell_metadata_keys"] == "tags"
    nbdev_req = next(r for r in settings["requirements"].split() if _name(r) == "nbdev")
    assert "<3" in nbdev_req


def test_ci_runs_the_readme_test_command():
    "CI runs the README's test command and nothing else: it installs what the tests need, so each test runs once."
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line for line in ci if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert re.search(r"(?m)^make test\b", readme) and commands == ["make test"], commands
