"Sphinx configuration of the companion site; `nbs/_site/build.py` stages the pages and runs Sphinx with it."
project = "posenc_nb"
author = "posenc_nb developers"
copyright = "2026 onwards, posenc_nb developers"
html_title = "posenc_nb: language models without positional encodings"

from importlib.util import find_spec
from pathlib import Path

extensions = ["myst_nb"]
# MathJax served by the site itself, not a CDN (read offline too): sphinx-mathjax-offline ships its files
html_static_path = [str(Path(find_spec("sphinx-mathjax-offline").origin).parent / "static")]
mathjax_path = "mathjax/tex-chtml.js"
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3  # the README's own links to its sections keep working
nb_execution_mode = "off"  # render the committed outputs; never run a notebook
nb_merge_streams = True  # a cell's printed lines form one block, not one block per flush
nb_ipywidgets_js = {}  # widget views are left out of the pages (no saved state): no widget scripts from a CDN
default_role = "code"  # `name` in a docstring is code, as in markdown

html_theme = "furo"
html_favicon = "favicon.svg"  # a causal mask; without one every browser asks for a missing /favicon.ico
html_show_sourcelink = False
html_copy_source = False  # the pages, not megabytes of notebook JSON beside them
exclude_patterns = ["**.ipynb_checkpoints"]
suppress_warnings = ["myst.header"]  # an exported cell's API (###) may follow the title (#) directly, as in nbdev
