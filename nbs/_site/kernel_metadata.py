"""Write into notebooks the kernel metadata JupyterLab writes when it opens them, so that opening one changes nothing
and closing it asks nothing. nbdev_clean keeps it (settings.ini: `allowed_metadata_keys = language_info`).

    python nbs/_site/kernel_metadata.py [NOTEBOOK ...]  # `make notebook-metadata`; default: all of nbs/
"""

from __future__ import annotations

import sys
from pathlib import Path

from execnb.nbio import read_nb, write_nb
from ipykernel.ipkernel import IPythonKernel

ROOT = Path(__file__).resolve().parents[2]
# The project's kernel, as `make setup` installs it (nbdev_clean names it "python3" too)
KERNELSPEC = {"display_name": "python3", "language": "python", "name": "python3"}


def lab_metadata() -> dict:
    "The notebook metadata JupyterLab sets from this environment's Python kernel: its kernelspec and language_info."
    return {"kernelspec": KERNELSPEC, "language_info": dict(IPythonKernel.language_info)}


def notebooks() -> list[Path]:
    "Every notebook under nbs/, leaving out folders nbdev skips (`_name`, `.name`, checkpoints)."
    return sorted(
        p
        for p in (ROOT / "nbs").rglob("*.ipynb")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(ROOT / "nbs").parts)
    )


def write_lab_metadata(path: Path) -> bool:
    "Give notebook `path` the metadata JupyterLab would write; whether the file changed."
    nb = read_nb(path)
    wanted = {**nb.metadata, **lab_metadata()}
    if wanted == nb.metadata:
        return False
    nb.metadata = wanted
    write_nb(nb, path)  # nbdev_clean's own writer: the file stays as nbdev_clean leaves it
    return True


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:]] or notebooks()
    changed = [p for p in paths if write_lab_metadata(p)]
    print(f"{len(changed)} of {len(paths)} notebooks given JupyterLab's kernel metadata")
