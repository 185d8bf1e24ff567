"""The companion site in a real browser: every page of `_docs/`, served on 127.0.0.1, opened in headless Chromium.

Needs the `docs` extra (Sphinx, MyST-NB, Playwright) and Debian's `chromium`; `make docs-test` installs both and runs
this file. Without them the browser tests are skipped, with the reason; the tests of how pages are staged from the
notebooks and the README run everywhere. The site is built first unless `_docs/` is newer than all it is built from."""
import functools, http.server, importlib.util, os, re, shutil, subprocess, threading
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "_proc" / "screenshots"  # the home page and an experiment page, to look at
CHROMIUM = os.environ.get("POSENC_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
MISSING = [name for name in ("sphinx", "myst_nb", "playwright") if importlib.util.find_spec(name) is None]
NEEDS = [pytest.mark.skipif(bool(MISSING), reason=f"the docs extra is not installed ({', '.join(MISSING)} missing): "
                                                 "`make docs-test` installs it and runs these tests"),
         pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium; "
                                                     "`make docs-test` installs it), or set POSENC_CHROMIUM")]


def in_browser(test):
    "A test of the built site in Chromium: skipped, with the reason, where the docs extra or Chromium is missing."
    for mark in NEEDS:
        test = mark(test)
    return test


# What a reader must never meet on a page
TQDM_BAR = re.compile(r"\d+%\|[^|\n]*\|\s*\d+/\d+")
FRONT_MATTER = re.compile(r"^\s*-?\s*(skip_exec|skip_showdoc|output-file)\s*:.*$", re.M)
WIDGET_TEXT = re.compile(r"Loading widget\.\.\.|[HV]Box\(children=|(?:Int|Float)Progress\(")
ABSOLUTE_PATH = re.compile(r"(?<![\w.~])/(?:work|home|root|tmp|Users)/[\w.-]+/\S*")


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
        def log_message(self, *args): pass

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
    path = site / unquote(parts.path[len(urlsplit(base).path):])
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
    if not name.startswith("library/"):  # the experiments' record of a run; a chapter's examples use temporary folders
        checks.append((ABSOLUTE_PATH, "absolute path of the machine it ran on"))
    for pattern, what in checks:
        problems += [f"{what}: {m.group(0).strip()!r}" for m in pattern.finditer(text)][:3]
    page.close()
    return problems


def pages(site: Path) -> list[str]:
    return sorted(str(p.relative_to(site)) for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith("_"))


@in_browser
def test_every_page_opens_clean_in_chromium(site, server, browser):
    "No broken link or image, no script or console error, nothing a static page should not show."
    assert len(pages(site)) > 20, f"only {len(pages(site))} pages in {site}"
    problems = {name: p for name in pages(site) if (p := page_problems(browser, site, server, name))}
    assert not problems, "\n".join(f"{name}:\n  " + "\n  ".join(p) for name, p in problems.items())


@in_browser
def test_math_renders(server, browser):
    "Formulas in markdown cells are typeset by MathJax, served by the site itself."
    page, problems = open_page(browser, urljoin(server, "library/00_encodings.html"))
    page.wait_for_selector("mjx-container", timeout=20_000)
    assert not problems and page.locator("mjx-container").count() > 3
    page.close()


@in_browser
def test_home_page_states_each_claim_and_links_its_experiment(site, server, browser):
    "One section per results section of the README, each linking to the experiment page that holds its figure."
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    results = readme.split("## Results", 1)[1]
    claims = [h for h in re.findall(r"^### (.+)$", results, re.M) if not h.startswith("Budget")]
    page, _ = open_page(browser, server)
    links = page.eval_on_selector_all("article a[href^='experiments/']", "links => links.map(a => a.getAttribute('href'))")
    linked = {Path(urlsplit(href).path).stem for href in links}
    build = load_builder()
    assert claims and {build.experiment_of(h).stem for h in claims} <= linked, f"the claims link only {sorted(linked)}"
    headings = page.eval_on_selector_all("h2", "hs => hs.map(h => h.textContent)")
    for claim in claims:
        assert any(re.sub(r"\s*\(`.*", "", claim) in h for h in headings), f"no section for {claim!r}: {headings}"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "home.png", full_page=True)
    page.close()
    page, _ = open_page(browser, urljoin(server, "experiments/01_extrapolation.html"))
    page.screenshot(path=SCREENSHOTS / "experiment_01_extrapolation.png", full_page=True)
    page.close()


@in_browser
def test_navigation_follows_the_paper(site):
    "Home, set-up, the experiments in the paper's order, then the library's chapters in theirs."
    html = (site / "index.html").read_text(encoding="utf-8")
    order = re.findall(r'class="reference internal" href="([^"#]+)"', html.split('class="sidebar-tree"', 1)[1])
    order = list(dict.fromkeys(order))
    experiments = [h for h in order if h.startswith("experiments/")]
    chapters = [h for h in order if h.startswith("library/")]
    assert order.index("setup.html") < order.index(experiments[0]) and order.index(experiments[-1]) < order.index(chapters[0])
    assert experiments == [f"experiments/{p.stem}.html" for p in in_reading_order(ROOT / "figures" / "notebooks", "*.ipynb")]
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
    for section, notebooks in [("library", in_reading_order(ROOT / "nbs", "[0-9]*.ipynb")),
                               ("experiments", in_reading_order(ROOT / "figures" / "notebooks", "*.ipynb"))]:
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
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("# | default_exp explore"),
        nbformat.v4.new_markdown_cell("# Attention explorer\n\n> Look at attention.\n\n- skip_exec: true\n- learned: a list item"),
        nbformat.v4.new_code_cell("# | hide\nfrom fastcore.test import test_eq"),
        nbformat.v4.new_code_cell("from fastcore.test import test_eq", metadata={"tags": ["hide"]}),
        nbformat.v4.new_code_cell("# | export\ndef shuffle_order(text, seed=0): ...\n\nclass AttentionExplorer:\n    def redraw(self): ..."),
        nbformat.v4.new_code_cell("train(cfg)", outputs=[nbformat.v4.new_output(
            "display_data", data={build.WIDGET: {"model_id": "x"}, "text/plain": "run:   0%|          | 0/30"})]),
    ])
    nbformat.write(nb, tmp_path / "17_explore.ipynb")
    build.stage_chapter(tmp_path / "17_explore.ipynb", tmp_path / "staged.ipynb")
    cells = nbformat.read(tmp_path / "staged.ipynb", as_version=4).cells
    sources = [c.source for c in cells]
    assert sources[0] == "# Attention explorer\n\n> Look at attention.\n\n- learned: a list item"
    assert not any("default_exp" in s or "# | " in s or "test_eq" in s for s in sources), sources
    exported, api = cells[1], cells[2]
    assert exported.metadata.tags == ["hide-input"] and exported.source.startswith("def shuffle_order")
    assert "### shuffle_order" in api.source and "reproducible from" in api.source and "#### AttentionExplorer.redraw" in api.source
    assert "[source]" not in api.source  # nbdev's link to a code host, which this project does not have
    assert cells[3].outputs == []  # a widget view without its state shows nothing a static page can render


def test_home_page_takes_each_claim_from_the_readme():
    "Every results section of the README on the home page, linked to the experiment page that holds its figure."
    build = load_builder()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    pages = build.readme_pages(readme)
    results = build.sections(next(b for h, b in build.sections(readme, 2) if h.startswith("Results")), 3)
    claims = [h for h, _ in results[1:] if not h.startswith("Budget")]
    for heading in claims:
        experiment = build.experiment_of(heading)
        assert f"](experiments/{experiment.name})" in pages["index.md"], heading
    assert pages["index.md"].count("\n## ") == len(claims) and "## Budget" not in pages["index.md"]
    assert "## The cpu profile" in pages["setup.md"] and "### Budget" in pages["setup.md"]
    assert "(figures/notebooks/" not in pages["index.md"] + pages["setup.md"]  # pointed at the site's own pages
    table = next(l for l in readme[readme.index("## Results"):].splitlines() if l.startswith("| ALiBi |"))
    assert table in pages["index.md"]  # the numbers are the README's, copied at build time, never retyped


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
    with pytest.raises(RuntimeError, match=r"figures/notebooks/01_extrapolation.ipynb is missing: the README's results "
                                           r"section 'Extrapolation \(`extrapolation.csv`\)' quotes what "
                                           r"nbs/experiments/01_extrapolation.ipynb writes. Run `posenc-reproduce --only "
                                           r"01_extrapolation`"):
        build.experiment_of("Extrapolation (`extrapolation.csv`)")


def test_make_docs_test_says_how_to_get_chromium(tmp_path):
    "Without Chromium and without network. Before: only apt's error and make's."
    for tool in ("id", "env"):  # what the Makefile's own lines need, and nothing else: no chromium on PATH
        (tmp_path / tool).symlink_to(shutil.which(tool))
    for stub, body in [("apt-get", 'echo "E: Could not resolve deb.debian.org" >&2; exit 100'), ("sudo", 'exec "$@"')]:
        (tmp_path / stub).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / stub).chmod(0o755)
    done = subprocess.run([shutil.which("make"), "-s", "-C", str(ROOT), "chromium"], capture_output=True, text=True,
                          env={"PATH": str(tmp_path), "HOME": str(tmp_path)}, timeout=60)
    assert done.returncode != 0 and "needs Chromium" in done.stderr, done.stderr
    assert "sudo apt-get install chromium" in done.stderr and "POSENC_CHROMIUM" in done.stderr, done.stderr
