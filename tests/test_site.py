"""The companion site in a real browser: every page of `_docs/`, served on 127.0.0.1, opened in headless Chromium.

Needs the `docs` extra (Sphinx, MyST-NB, Playwright) and Debian's `chromium`; `make docs-test` installs both and runs
this file. Without them the browser tests are skipped, with the reason; the tests of how pages are staged from the
notebooks and the README run everywhere. The site is built first unless `_docs/` is newer than all it is built from."""

import functools
import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "_proc" / "screenshots"  # the home page (desktop and phone) and an experiment page, to look at
CHROMIUM = os.environ.get("POSENC_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
MISSING = [name for name in ("sphinx", "myst_nb", "playwright") if importlib.util.find_spec(name) is None]
NEEDS = [
    pytest.mark.skipif(
        bool(MISSING),
        reason=f"the docs extra is not installed ({', '.join(MISSING)} missing): "
        "`make docs-test` installs it and runs these tests",
    ),
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no chromium on PATH (Debian: apt-get install chromium; "
        "`make docs-test` installs it), or set POSENC_CHROMIUM",
    ),
]


def in_browser(test):
    "A test of the built site in Chromium: skipped, with the reason, where the docs extra or Chromium is missing."
    for mark in [*NEEDS, pytest.mark.slow]:
        test = mark(test)
    return test


# What a reader must never meet on a page
TQDM_BAR = re.compile(r"\d+%\|[^|\n]*\|\s*\d+/\d+")
FRONT_MATTER = re.compile(r"^\s*-?\s*(skip_exec|skip_showdoc|output-file)\s*:.*$", re.M)
WIDGET_TEXT = re.compile(r"Loading widget\.\.\.|[HV]Box\(children=|(?:Int|Float)Progress\(")
# ... nor anything of the machine a notebook ran on, in an output or the API (a cell's own code may name example paths)
MACHINE_TEXT = [
    (
        re.compile(r"Traceback \(most recent call last\)|ChildFailedError|^\s*File \"[^\"\n]+\", line \d+", re.M),
        "a traceback",
    ),
    (
        re.compile(
            r"(?<![\w.~])/(?:work|home|root|tmp|Users|private/var|var/folders)/[\w.-]+\S*"
            r"|\S*site-packages\S*|\S*ipykernel_\d+\S*"
        ),
        "a path of the machine it ran on",
    ),
    (re.compile(r"\S*\.staging-\S*"), "the runner's staging folder"),
]
PHONE = {"width": 390, "height": 844}  # a phone's window; the desktop one is open_page's 1280 x 900


def load_builder():
    spec = importlib.util.spec_from_file_location("site_build", ROOT / "nbs" / "_site" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site():
    "The built site's folder, rebuilt if any of its sources is newer."
    build = load_builder()
    if build.stale():
        assert build.main() == 0, "the site did not build: see Sphinx's messages above"
    return build.OUT


@pytest.fixture(scope="module")
def server(site):
    "The site served over HTTP on 127.0.0.1 (any free port): its base URL."

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def open_page(browser, url: str) -> tuple[object, list[str]]:
    "A loaded page and what went wrong while loading it: console errors, script errors, failed requests."
    page, problems = browser.new_page(viewport={"width": 1280, "height": 900}), []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} ({r.failure})"))
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.goto(url, wait_until="networkidle")
    return page, problems


def target_problem(site: Path, base: str, href: str) -> str | None:
    "Why an internal link leads nowhere (no file, or no element with its #fragment), or None."
    parts = urlsplit(href)
    path = site / unquote(parts.path[len(urlsplit(base).path) :])
    path = path / "index.html" if path.is_dir() else path
    if not path.is_file():
        return f"no file {path.relative_to(site)}"
    if parts.fragment and path.suffix == ".html":
        if f'id="{unquote(parts.fragment)}"' not in path.read_text(encoding="utf-8"):
            return f"no #{parts.fragment} in {path.relative_to(site)}"


def page_problems(browser, site: Path, base: str, name: str) -> list[str]:
    "Everything a reader of page `name` would trip over."
    page, problems = open_page(browser, urljoin(base, name))
    for href in page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)"):
        if href.startswith(base) and (problem := target_problem(site, base, href)):
            problems.append(f"broken link {href}: {problem}")
    images = page.eval_on_selector_all("img", "imgs => imgs.map(i => [i.src, i.complete && i.naturalWidth > 0])")
    problems += [f"broken image {src}" for src, shown in images if not shown]
    problems += [f"image inlined as data, not a file: {src[:40]}..." for src, _ in images if src.startswith("data:")]
    if page.locator(".output.error, .output.traceback").count():
        problems.append("an error output cell")
    text = page.inner_text("body")
    checks = [(FRONT_MATTER, "raw front matter"), (WIDGET_TEXT, "widget placeholder"), (TQDM_BAR, "progress bar")]
    for pattern, what in checks:
        problems += [f"{what}: {m.group(0).strip()!r}" for m in pattern.finditer(text)][:3]
    problems += too_wide(page, "1280 px")
    page.set_viewport_size(PHONE)
    problems += too_wide(page, f"{PHONE['width']} px")
    for pattern, what in MACHINE_TEXT:
        problems += [f"{what}: {m.group(0).strip()!r}" for m in pattern.finditer(shown_but_code(page))][:3]
    page.close()
    return problems


def too_wide(page, window: str) -> list[str]:
    """Whether the page scrolls sideways in its window: the document wider than the window, or Furo's content column
    wider than itself (on a phone the column scrolls, not the page). Names the first thing that sticks out, outside a
    box that scrolls on its own (a table's, a code block's)."""
    wide = page.evaluate("""() => {
      const column = document.querySelector('.content') || document.body;
      const edge = column.getBoundingClientRect().right + 1, scrolls = ['auto', 'scroll', 'hidden'];
      const boxed = el => { for (let p = el.parentElement; p && p !== column; p = p.parentElement)
        if (scrolls.includes(getComputedStyle(p).overflowX) && p.getBoundingClientRect().right <= edge) return true;
        return false; };
      const out = [...column.querySelectorAll('*')].find(el => el.getBoundingClientRect().right > edge && !boxed(el));
      return {page: document.documentElement.scrollWidth, window: window.innerWidth, column: column.scrollWidth,
              room: column.clientWidth, out: out ? `<${out.tagName.toLowerCase()} class="${out.className}"> ` +
              out.textContent.replace(/\\s+/g, ' ').trim().slice(0, 60) : ''};
    }""")
    problems = []
    if wide["page"] > wide["window"] or wide["column"] > wide["room"] + 1:
        problems.append(
            f"wider than its window at {window}: the page {wide['page']} px, its content "
            f"{wide['column']} px in {wide['room']} px ({wide['out'] or 'nothing sticks out alone'})"
        )
    return problems + [f"a value broken over two lines at {window}: {cell!r}" for cell in split_values(page)]


def split_values(page) -> list[str]:
    "Table cells holding one value (`6.4 ± 0.3`, `-0.077`, `12%`) that the browser laid out on more than one line."
    return page.evaluate(r"""() => [...document.querySelectorAll('article td, article th')]
      .filter(cell => /^[-+−]?[\d.,]+%?(\s*±\s*[\d.,]+%?)?$/.test(cell.innerText.trim()))
      .filter(cell => {
        const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT), tops = [];
        for (let node; (node = walk.nextNode());) {
          const range = document.createRange(); range.selectNodeContents(node);
          tops.push(...[...range.getClientRects()].filter(r => r.width > 0).map(r => r.top));
        }
        return tops.length && Math.max(...tops) - Math.min(...tops) > 4;
      }).map(cell => cell.innerText.trim()).slice(0, 3)""")


def shown_but_code(page) -> str:
    "The page's text with every folded part opened, less the cells' own code: what it shows of its outputs and API."
    return page.evaluate("""() => {
      document.querySelectorAll('details').forEach(d => d.open = true);
      const hide = document.createElement('style');
      hide.textContent = '.cell_input { display: none !important }';
      document.head.append(hide);
      const text = document.body.innerText;
      hide.remove();
      return text;
    }""")


def pages(site: Path) -> list[str]:
    return sorted(
        str(p.relative_to(site)) for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith("_")
    )


@in_browser
def test_every_page_opens_clean_in_chromium(site, server, browser):
    """No broken link or image, no script or console error, nothing a static page should not show: nothing of the
    machine a notebook ran on (a traceback, its paths, the runner's staging folder), and no page wider than its
    window at 1280 px or at a phone's 390 px, nor a table cell's value broken over two lines."""
    assert len(pages(site)) > 20, f"only {len(pages(site))} pages in {site}"
    problems = {name: p for name in pages(site) if (p := page_problems(browser, site, server, name))}
    assert not problems, "\n".join(f"{name}:\n  " + "\n  ".join(p) for name, p in problems.items())


@in_browser
def test_math_renders(server, browser):
    "Formulas in markdown cells are typeset by MathJax, served by the site itself."
    page, problems = open_page(browser, urljoin(server, "library/01_encodings.html"))
    page.wait_for_selector("mjx-container", timeout=20_000)
    assert not problems and page.locator("mjx-container").count() > 3
    page.close()


@in_browser
def results_claims(build) -> list[str]:
    "The results page's sections (figures/README.md) that quote an experiment's files: one claim's section each."
    results = (ROOT / "figures" / "README.md").read_text(encoding="utf-8")
    return [h for h, _ in build.sections(results, 2)[1:] if build.named_files(h)]


def test_home_page_states_each_claim_and_links_its_experiment(site, server, browser):
    """The claims table first, then one section per results section, each linking to the experiment page that holds
    its figure."""
    build = load_builder()
    claims = results_claims(build)
    page, _ = open_page(browser, server)
    links = page.eval_on_selector_all(
        "article a[href^='experiments/']", "links => links.map(a => a.getAttribute('href'))"
    )
    linked = {Path(urlsplit(href).path).stem for href in links}
    assert claims and {build.experiment_of(h).stem for h in claims} <= linked, f"the claims link only {sorted(linked)}"
    headings = page.eval_on_selector_all("h2", "hs => hs.map(h => h.textContent)")
    for claim in claims:
        assert any(re.sub(r"\s*\(`.*", "", claim) in h for h in headings), f"no section for {claim!r}: {headings}"
    block = re.search(r"<!-- generated:claims -->\n(.*?)\n<!-- /generated:claims -->", build.RESULTS.read_text(), re.S)
    if block.group(1).startswith("|"):  # the claims table leads
        assert page.locator("article table").first.inner_text().startswith("claim")
    else:  # a claims.csv older than its declared columns: the block's one line says so, and the page with it
        assert letters(block.group(1)) in letters(page.locator("article").first.inner_text())
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "home.png", full_page=True)
    page.set_viewport_size(PHONE)
    page.screenshot(path=SCREENSHOTS / "home_phone.png", full_page=True)
    page.close()
    page, _ = open_page(browser, urljoin(server, "experiments/01_extrapolation.html"))
    page.screenshot(path=SCREENSHOTS / "experiment_01_extrapolation.png", full_page=True)
    page.close()


def letters(text: str) -> str:
    "Text compared across markdown and a page: letters and digits only (emphasis, code marks and spacing differ)."
    return re.sub(r"[^0-9A-Za-z]", "", text)


@in_browser
def test_each_finding_is_its_own_paragraph(site, server, browser):
    """Every generated findings block of the README and the results beside it (`figures/*.md`;
    `posenc_nb.report.render`) is a quote on the site with one paragraph a finding. Before: the lines of a block ran
    together into one paragraph, finding after finding."""
    from posenc_nb.report import readme_blocks

    blocks = {
        f"{source.relative_to(ROOT)} {name}": [
            line for raw in body.splitlines() if (line := raw.removeprefix(">").strip())
        ]
        for source in [ROOT / "README.md", *sorted((ROOT / "figures").glob("*.md"))]
        for name, body in readme_blocks(source.read_text(encoding="utf-8")).items()
        if name.startswith("findings/")
    }
    assert blocks, "no generated findings block in the README or figures/*.md"
    quotes = []
    for name in (p for p in pages(site) if "/" not in p):  # the pages made of markdown: home, set-up, results
        page, _ = open_page(browser, urljoin(server, name))
        quotes += page.eval_on_selector_all(
            "article blockquote", "qs => qs.map(q => [q.innerText, [...q.querySelectorAll('p')].map(p => p.innerText)])"
        )
        page.close()
    problems = []
    for name, lines in blocks.items():
        shown = [paragraphs for text, paragraphs in quotes if letters(text) == letters("".join(lines))]
        if not shown:
            problems.append(f"{name}: its {len(lines)} finding(s) are in no quote of the site's own pages")
        elif [letters(p) for p in shown[0]] != [letters(line) for line in lines]:
            merged = next((p for p in shown[0] if sum(letters(line) in letters(p) for line in lines) > 1), shown[0][0])
            problems.append(
                f"{name}: {len(lines)} findings shown as {len(shown[0])} paragraph(s), e.g. {merged[:160]!r}"
            )
    assert not problems, "\n".join(problems)


@in_browser
def test_navigation_follows_the_paper(site):
    "Home, set-up, the experiments in the paper's order, then the library's chapters in theirs."
    html = (site / "index.html").read_text(encoding="utf-8")
    order = re.findall(r'class="reference internal" href="([^"#]+)"', html.split('class="sidebar-tree"', 1)[1])
    order = list(dict.fromkeys(order))
    experiments = [h for h in order if h.startswith("experiments/")]
    chapters = [h for h in order if h.startswith("library/")]
    assert order.index("setup.html") < order.index(experiments[0]) and order.index(experiments[-1]) < order.index(
        chapters[0]
    )
    assert experiments == [
        f"experiments/{p.stem}.html" for p in in_reading_order(ROOT / "figures" / "notebooks", "*.ipynb")
    ]
    assert chapters == [f"library/{p.stem}.html" for p in in_reading_order(ROOT / "nbs", "[0-9]*.ipynb")]


def in_reading_order(folder: Path, pattern: str) -> list[Path]:
    "The notebooks in `folder`, by number, each lettered chapter after its parent: 02, 02a, 02b, 03, ..., 12, 12a, 12e."

    def key(path):
        digits, letters = re.match(r"(\d*)([a-z]*)", path.stem).groups()
        return int(digits or -1), letters, path.name

    return sorted(folder.glob(pattern), key=key)


def test_every_notebook_has_a_page_in_order(tmp_path):
    """Every chapter (`nbs/[0-9]*.ipynb`, lettered ones such as 02a or 12e included) and every executed experiment
    notebook (`figures/notebooks/`) is staged as a page and listed, in order, in its section's navigation: the
    expected pages come from the folders, so a notebook added tomorrow is checked too."""
    build = load_builder()
    build.stage(tmp_path / "site")
    for section, notebooks in [
        ("library", in_reading_order(ROOT / "nbs", "[0-9]*.ipynb")),
        ("experiments", in_reading_order(ROOT / "figures" / "notebooks", "*.ipynb")),
    ]:
        expected = [p.stem for p in notebooks]
        assert len(expected) > 10, f"only {expected} found for {section}"
        staged = {p.stem for p in (tmp_path / "site" / section).glob("*.ipynb")}
        assert not set(expected) - staged, f"no {section} page for {sorted(set(expected) - staged)}"
        assert not staged - set(expected), f"{section} pages without a notebook: {sorted(staged - set(expected))}"
        index = (tmp_path / "site" / f"{section}.md").read_text(encoding="utf-8")
        toctree = index.split("```{toctree}", 1)[1].split("```", 1)[0]
        assert re.findall(rf"^{section}/(\S+)$", toctree, re.M) == expected, f"{section}.md's navigation"
        for stem in expected:  # each listed with its own number: `02a · ...`, not `02 · ...`
            assert f"- [{stem.split('_', 1)[0]} · " in index and f"]({section}/{stem}.ipynb)" in index, stem


def test_a_chapter_is_staged_as_nbdev_shows_it(tmp_path):
    "Front matter, hidden cells, directives and widget views go; each exported cell is folded and followed by its API."
    import nbformat

    build = load_builder()
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("# | default_exp explore"),
            nbformat.v4.new_markdown_cell(
                "# Attention explorer\n\n> Look at attention.\n\n- skip_exec: true\n- learned: a list item"
            ),
            nbformat.v4.new_code_cell("# | hide\nfrom fastcore.test import test_eq"),
            nbformat.v4.new_code_cell("from fastcore.test import test_eq", metadata={"tags": ["hide"]}),
            nbformat.v4.new_code_cell(
                "# | export\ndef shuffle_order(text, seed=0): "
                "...\n\nclass AttentionExplorer:\n    def redraw(self): ..."
            ),
            nbformat.v4.new_code_cell(
                "train(cfg)",
                outputs=[
                    nbformat.v4.new_output(
                        "display_data",
                        data={build.WIDGET: {"model_id": "x"}, "text/plain": "run:   0%|          | 0/30"},
                    )
                ],
            ),
        ]
    )
    nbformat.write(nb, tmp_path / "07_explore.ipynb")
    build.stage_chapter(tmp_path / "07_explore.ipynb", tmp_path / "staged.ipynb")
    cells = nbformat.read(tmp_path / "staged.ipynb", as_version=4).cells
    sources = [c.source for c in cells]
    assert sources[0] == "# Attention explorer\n\n> Look at attention.\n\n- learned: a list item"
    assert not any("default_exp" in s or "# | " in s or "test_eq" in s for s in sources), sources
    exported, api = cells[1], cells[2]
    assert exported.metadata.tags == ["hide-input"] and exported.source.startswith("def shuffle_order")
    assert (
        "### shuffle_order" in api.source
        and "reproducible from" in api.source
        and "#### AttentionExplorer.redraw" in api.source
    )
    assert "[source]" not in api.source  # nbdev's link to a code host, which this project does not have
    assert cells[3].outputs == []  # a widget view without its state shows nothing a static page can render


def test_the_api_shows_a_class_as_a_class():
    """A dataclass with its fields, a NamedTuple with its fields, an exception with what it derives from; a default
    computed from the checkout as its source writes it. Before: `def Claim(...)->None:`, `def AttentionBias(*args,
    **kwargs)`, and `Path('/home/.../nbs/experiments')`."""
    from posenc_nb.checksums import CheckpointError
    from posenc_nb.claims import Claim
    from posenc_nb.model import AttentionBias
    from posenc_nb.reproduce import experiment_notebooks

    build = load_builder()
    shown = {
        o.__name__: build.show_doc_markdown(o, o.__name__, 3)
        for o in (Claim, AttentionBias, CheckpointError, experiment_notebooks)
    }
    assert "```python\nclass Claim(\n    claim:str, status:str," in shown["Claim"]
    assert "def Claim" not in shown["Claim"] and "->None" not in shown["Claim"]
    assert "```python\nclass AttentionBias(\n    block:Callable[" in shown["AttentionBias"]
    assert "```python\nclass CheckpointError(RuntimeError)\n```" in shown["CheckpointError"]
    function = shown["experiment_notebooks"]
    assert "```python\ndef experiment_notebooks(" in function and "=EXPERIMENTS_DIR" in function
    assert str(ROOT) not in function  # the reader's checkout is elsewhere


def test_an_experiment_page_shows_where_its_outputs_are(tmp_path):
    "papermill's injected parameters name the runner's staging folder; the page names the folder the outputs are in."
    import nbformat

    build = load_builder()
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# Toy\n\n> A toy."),
            nbformat.v4.new_code_cell("out_dir = '../../figures'", metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell(
                '# Parameters\nprofile = "cpu"\nout_dir = "../../figures/.staging-01_toy"\n',
                metadata={"tags": ["injected-parameters"]},
            ),
        ]
    )
    nbformat.write(nb, tmp_path / "01_toy.ipynb")
    build.stage_experiment(tmp_path / "01_toy.ipynb", tmp_path / "staged.ipynb")
    cells = nbformat.read(tmp_path / "staged.ipynb", as_version=4).cells
    assert cells[2].source == '# Parameters\nprofile = "cpu"\nout_dir = "../../figures"\n'


def test_home_page_takes_each_claim_from_the_results_page():
    "The claims table and every results section of figures/README.md on the home page, linked to its experiment page."
    build = load_builder()
    results = (ROOT / "figures" / "README.md").read_text(encoding="utf-8")
    pages = build.readme_pages((ROOT / "README.md").read_text(encoding="utf-8"))
    claims = results_claims(build)
    for heading in claims:
        experiment = build.experiment_of(heading)
        assert f"](experiments/{experiment.name})" in pages["index.md"], heading
    assert pages["index.md"].count("\n## ") == len(claims) + 1 and "<!-- generated:claims -->" in pages["index.md"]
    assert (
        "## Budget" not in pages["index.md"]
        and "## The cpu profile" in pages["setup.md"]
        and "### Budget" in pages["setup.md"]
    )
    assert all(f"\n## {h}\n" in pages["setup.md"] for h in ("Developer guide", "Speed"))
    assert "(figures/notebooks/" not in pages["index.md"] + pages["setup.md"]  # pointed at the site's own pages
    table = next(line for line in results.splitlines() if line.startswith("| ALiBi |"))
    assert table in pages["index.md"]  # the numbers are the results page's, copied at build time, never retyped


@pytest.mark.parametrize("damage", [b'{"cells": [', b"[]", b"\xff\xfe"])
def test_a_damaged_notebook_is_named_with_what_to_do(tmp_path, damage):
    "A chapter, or an executed copy, that is not a notebook. Before: nbformat's raw traceback, naming no file."
    build = load_builder()
    chapter, executed = tmp_path / "99_broken.ipynb", tmp_path / "notebooks" / "99_broken.ipynb"
    executed.parent.mkdir()
    for path in (chapter, executed):
        path.write_bytes(damage)
    with pytest.raises(RuntimeError, match=re.escape(f"{chapter} is not a readable notebook")) as error:
        build.stage_chapter(chapter, tmp_path / "staged.ipynb")
    assert "fix it, or restore it (`git checkout --" in str(error.value) and "then rerun make docs" in str(error.value)
    with pytest.raises(RuntimeError, match=re.escape(f"{executed} is not a readable notebook")) as error:
        build.stage_experiment(executed, tmp_path / "staged.ipynb")
    assert "rerun `posenc-reproduce --only 99_broken`" in str(error.value)


def test_make_docs_names_an_experiment_not_executed_yet(tmp_path, capsys, monkeypatch):
    """A results section of the README quotes a notebook that figures/notebooks/ lacks (or shows a figure it has not
    drawn yet). Before: a raw traceback whose message blamed the README's heading (or named no setting to change)."""
    build = load_builder()
    monkeypatch.setattr(build, "STAGE", tmp_path / "site")  # not the real stage
    monkeypatch.setattr(build, "EXPERIMENTS", [])  # as on a checkout whose notebooks have not been executed
    assert build.main() == 1
    err = capsys.readouterr().err
    assert err.startswith("make docs: figures/") and " is missing" in err and "README" in err, err
    assert "`posenc-reproduce --only " in err and "Traceback" not in err and err.count("\n") == 1, err
    with pytest.raises(
        RuntimeError,
        match=r"figures/notebooks/01_extrapolation.ipynb is missing: figures/README.md's results "
        r"section 'Extrapolation \(`extrapolation.csv`\)' quotes what "
        r"nbs/experiments/01_extrapolation.ipynb writes. Run `posenc-reproduce --only "
        r"01_extrapolation`",
    ):
        build.experiment_of("Extrapolation (`extrapolation.csv`)")


def test_make_docs_test_says_how_to_get_chromium(tmp_path):
    "Without Chromium and without network. Before: only apt's error and make's."
    for tool in ("id", "env"):  # what the Makefile's own lines need, and nothing else: no chromium on PATH
        (tmp_path / tool).symlink_to(shutil.which(tool))
    for stub, body in [("apt-get", 'echo "E: Could not resolve deb.debian.org" >&2; exit 100'), ("sudo", 'exec "$@"')]:
        (tmp_path / stub).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / stub).chmod(0o755)
    done = subprocess.run(
        [shutil.which("make"), "-s", "-C", str(ROOT), "chromium"],
        capture_output=True,
        text=True,
        env={"PATH": str(tmp_path), "HOME": str(tmp_path)},
        timeout=60,
    )
    assert done.returncode != 0 and "needs Chromium" in done.stderr, done.stderr
    assert "sudo apt-get install chromium" in done.stderr and "POSENC_CHROMIUM" in done.stderr, done.stderr
