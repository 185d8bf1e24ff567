"Sphinx configuration of the companion site; `nbs/_site/build.py` stages the pages and runs Sphinx with it."

from importlib.util import find_spec
from pathlib import Path

project = "posenc_nb"
author = "posenc_nb developers"
copyright = "2026 onwards, posenc_nb developers"
html_title = "posenc_nb: language models without positional encodings"

extensions = ["myst_nb"]
# MathJax served by the site itself, not a CDN (read offline too): sphinx-mathjax-offline ships its files
html_static_path = [str(Path(find_spec("sphinx-mathjax-offline").origin).parent / "static"), "site.css"]
html_css_files = ["site.css"]  # the site's rules over Furo's: a wide table scrolls in its own box, never the page
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


def tables_for_reading(app, doctree, docname):
    """A table cell's `6.4 ± 0.3` never breaks over two lines (`6.4 ±` above `0.3`): the spaces around ± do not break.
    A table of sentences (the claims') is marked `wordy`, so that on a phone its columns keep a readable width and the
    table scrolls in its box (site.css), rather than squeezing each sentence into a column a word wide."""
    from docutils import nodes

    for table in doctree.findall(nodes.table):
        entries = list(table.findall(nodes.entry))
        if any(len(entry.astext()) > 80 for entry in entries):
            table["classes"].append("wordy")
        for entry in entries:
            for text in list(entry.findall(nodes.Text)):
                if " ± " in text and not isinstance(text.parent, (nodes.literal, nodes.literal_block)):
                    text.parent.replace(text, nodes.Text(text.replace(" ± ", "\u00a0±\u00a0")))


def setup(app):
    app.connect("doctree-resolved", tables_for_reading)
