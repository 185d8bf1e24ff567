"""Build the companion site: stage pages from the committed notebooks and README into `_proc/site/`, then render them
with Sphinx and MyST-NB into `_docs/`. Nothing is executed: pages show the outputs the notebooks were committed with.

    python nbs/_site/build.py          # what `make docs` runs; serve with `python -m http.server -d _docs`
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import shutil
import sys
import textwrap
import time
from pathlib import Path

import nbformat

from posenc_nb.parameter_cells import read_notebook
from posenc_nb.commands import run_command

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(__file__).resolve().parent
STAGE, OUT = ROOT / "_proc" / "site", ROOT / "_docs"


def number(path: Path) -> str:
    "A notebook's number as a reader sees it: `00` of `00_files`, `05b` of `05b_claims`."
    return path.stem.split("_", 1)[0]


def in_order(paths) -> list[Path]:
    "Notebooks in their numbers' order, a lettered one after its parent: 02, 02a, 02b, 03, ..., 12, 12a, ..., 14b."

    def key(path):
        digits, letters = re.match(r"(\d*)(.*)", number(path)).groups()
        return int(digits or -1), letters, path.name

    return sorted(paths, key=key)


# Every notebook that has a page, found in its folder at build time: a chapter added tomorrow gets one too
CHAPTERS = in_order((ROOT / "nbs").glob("[0-9]*.ipynb"))  # the library, one module each: 01_encodings, 02a_..., 12e_...
EXPERIMENTS = in_order((ROOT / "figures" / "notebooks").glob("*.ipynb"))  # executed by the runner, in the paper's order
DIRECTIVE = re.compile(r"^#\s*\|\s*([\w-]+)(.*)$")  # nbdev's `#| export` cell directives (any spacing)
# nbdev/Quarto front matter in a title cell (`- skip_exec: true`): settings for a renderer, not text for a reader
FRONT_MATTER = re.compile(
    r"^- (?:skip_exec|skip_showdoc|output-file|title|description|order|categories|image): .*\n?", re.M
)
WIDGET = "application/vnd.jupyter.widget-view+json"
STAGING = re.compile(r"/\.staging-[^\s\"'/]*(?=[\"'])")  # the runner's staging folder at the end of a quoted path
NAVIGATION = (
    "```{toctree}\n:hidden:\n\nsetup\nexperiments\nlibrary\n```\n"  # the reader's order: set-up, the paper, the code
)


def notebook(path: Path):
    """A notebook the site is built from: a chapter, or an executed copy (in `figures/notebooks/`). One that cannot be
    read is named, with how to get it back."""
    again = f"rerun `posenc-reproduce --only {path.stem}`" if path.parent.name == "notebooks" else "fix it"
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return read_notebook(path, f"{again}, or restore it (`git checkout -- {shown}`), then rerun make docs")


def directives(cell) -> dict[str, str]:
    "The nbdev directives of a code cell, `{name: arguments}`."
    return {m[1]: m[2].strip() for line in cell.source.splitlines() if (m := DIRECTIVE.match(line.strip()))}


def without_directives(source: str) -> str:
    "A code cell's source as a reader sees it in nbdev's docs: without its directive lines."
    return "\n".join(line for line in source.splitlines() if not DIRECTIVE.match(line.strip())).strip("\n")


def tidy_title(cell):
    "Drop front-matter lines from a notebook's title cell: they configure a renderer, the reader never sees them."
    if cell.cell_type == "markdown" and cell.source.lstrip().startswith("# "):
        cell.source = FRONT_MATTER.sub("", cell.source)


def static_outputs(outputs: list) -> list:
    """Outputs a static page can show. A widget view without its saved state is an empty box outside a live kernel
    (its text fallback is a progress bar's first frame), so it is left out."""
    return [o for o in outputs if WIDGET not in o.get("data", {})]


def show_doc_markdown(obj, name: str, level: int) -> str:
    """nbdev's show_doc of `obj` as markdown: signature, docstring, parameter table; its link to the source on the code
    host of settings.ini is dropped (the site stands alone).
    An annotation naming a type imported only for type checkers cannot be evaluated: then the signature is shown as
    written, with the docstring."""
    from nbdev.showdoc import show_doc

    try:
        md = show_doc(obj, name=name, title_level=level)._repr_markdown_()
    except (NameError, OSError):  # OSError: no source to read parameter comments from
        kind = "class" if isinstance(obj, type) else "def"
        md = (
            f"---\n\n{'#' * level} {name}\n\n```python\n{kind} {name.split('.')[-1]}{inspect.signature(obj)}\n```\n\n"
            f"*{inspect.getdoc(obj) or ''}*"
        )
    md = defaults_as_written(obj, re.sub(r"^\[source\]\(.*\)\{.*\}\n", "", md, flags=re.M))
    return as_class(obj, md) if isinstance(obj, type) else md


def as_class(cls: type, md: str) -> str:
    """A class's show_doc drawn as a class: nbdev draws it as a function (`def Claim(...)->None:`). Its signature is
    what its constructor takes (a dataclass's fields); where nbdev reads none, the fields Python reads (a NamedTuple's),
    or else what it derives from, as its `class` statement says (an exception's `RuntimeError`)."""
    code = re.search(r"```python\n(?:def|class) \w+(.*?)\n```", md, re.S)
    if code is None:
        return md
    unread = "(\n    *args, **kwargs\n)"
    signature = re.sub(r"\)(?:->None)?:$", ")", code[1].rstrip())  # `->None:` is __init__'s, not the class's
    if signature == unread:
        try:
            signature = fields(inspect.signature(cls))
        except (TypeError, ValueError):  # no signature of its own
            signature = ""
    if signature in ("", unread):
        bases = [
            b.__name__ if b.__module__ in ("builtins", cls.__module__) else f"{b.__module__}.{b.__qualname__}"
            for b in cls.__bases__
            if b is not object
        ]
        signature = f"({', '.join(bases)})" if bases else ""
    return md[: code.start()] + f"```python\nclass {cls.__name__}{signature}\n```" + md[code.end() :]


def fields(signature: inspect.Signature) -> str:
    "A signature as nbdev writes one (`name:type=default`), a postponed annotation (a string, a ForwardRef) as written."

    def written(p):
        stars = "*" if p.kind == p.VAR_POSITIONAL else "**" if p.kind == p.VAR_KEYWORD else ""
        note = getattr(p.annotation, "__forward_arg__", p.annotation)
        note = "" if note is p.empty else f":{note if isinstance(note, str) else inspect.formatannotation(note)}"
        return stars + p.name + note + ("" if p.default is p.empty else f"={p.default!r}")

    params = ", ".join(map(written, signature.parameters.values()))
    return f"(\n    {params}\n)" if params else ""


def defaults_as_written(obj, md: str) -> str:
    """A default that holds a path of the machine the site was built on (`Path('/home/.../nbs/experiments')`) shown as
    its source writes it (`EXPERIMENTS_DIR`): the reader's checkout is elsewhere."""
    if str(ROOT) not in md:
        return md
    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(obj))).body[0]
    except (OSError, TypeError, SyntaxError):
        return md
    if isinstance(node, ast.ClassDef):  # a class's parameters are its constructor's
        node = next((n for n in node.body if getattr(n, "name", "") == "__init__"), None)
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return md
    args = node.args
    written = {a.arg: ast.unparse(d) for a, d in zip([*args.posonlyargs, *args.args][::-1], args.defaults[::-1])}
    written |= {a.arg: ast.unparse(d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
    machine = re.compile(rf"\b(\w+)(:[^=,\n]*)?=((?:\w+\()?['\"]{re.escape(str(ROOT))}[^'\"]*['\"]\)?)")
    return machine.sub(lambda m: f"{m[1]}{m[2] or ''}={written.get(m[1], m[3])}", md)


def documented(source: str, module) -> list[tuple[object, str, int]]:
    """What nbdev's docs show after an exported cell: its public functions and classes (and a class's own public
    methods), and functions attached to a class with `@patch`, as `(object, name, heading level)`."""
    found, public = [], set(getattr(module, "__all__", []))
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in public:
            found.append((getattr(module, node.name), node.name, 3))
            if isinstance(node, ast.ClassDef):
                cls = getattr(module, node.name)
                found += [
                    (getattr(cls, m.name), f"{node.name}.{m.name}", 4)
                    for m in node.body
                    if isinstance(m, ast.FunctionDef) and not m.name.startswith("_")
                ]
        elif isinstance(node, ast.FunctionDef) and any(ast.unparse(d) == "patch" for d in node.decorator_list):
            owner = ast.unparse(node.args.args[0].annotation)
            found.append((getattr(getattr(module, owner), node.name), f"{owner}.{node.name}", 4))
    return found


def stage_chapter(src: Path, dst: Path):
    """A library chapter as nbdev's docs show it: hidden cells and directives gone, each exported cell folded away and
    followed by the API of what it defines (nbdev's show_doc, from the imported module: nothing is executed)."""
    nb = notebook(src)
    module, cells = None, []
    for cell in nb.cells:
        tidy_title(cell)
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        flags = directives(cell)
        if "default_exp" in flags:
            module = importlib.import_module(f"posenc_nb.{flags['default_exp']}")
        if "default_exp" in flags or "hide" in flags or "hide" in cell.metadata.get("tags", []):
            continue
        cell.source, cell.outputs = without_directives(cell.source), static_outputs(cell.outputs)
        cells.append(cell)
        if "export" in flags and module is not None:
            cell.metadata["tags"] = [*cell.metadata.get("tags", []), "hide-input"]
            docs = [show_doc_markdown(*d) for d in documented(cell.source, module)]
            if docs:
                cells.append(nbformat.v4.new_markdown_cell("\n\n".join(docs)))
    nb.cells = cells
    nbformat.write(nb, dst)


def stage_experiment(src: Path, dst: Path):
    "An executed experiment notebook, as the runner kept it, less what a static page cannot show."
    nb = notebook(src)
    for cell in nb.cells:
        tidy_title(cell)
        if cell.cell_type == "markdown":  # a link to an executed copy, from its source's folder, is a link to a page
            cell.source = re.sub(r"\]\((?:\.\./)*figures/notebooks/([\w-]+\.ipynb)\)", r"](\1)", cell.source)
        else:
            cell.source, cell.outputs = unstaged(cell), static_outputs(cell.outputs)
    nbformat.write(nb, dst)


def unstaged(cell) -> str:
    """A code cell's source, papermill's injected parameters with the folder the outputs are in: the runner executes
    into a staging folder (`out_dir = "../../figures/.staging-01_extrapolation"`) that it empties into the stated
    `../../figures` once the notebook succeeds, and the reader is never shown the runner's scaffolding."""
    if "injected-parameters" not in cell.metadata.get("tags", []):
        return cell.source
    return STAGING.sub("", cell.source)


def title_and_summary(path: Path) -> tuple[str, str]:
    "A notebook's `# title` and its `> summary` line."
    first = next(c.source for c in notebook(path).cells if c.cell_type == "markdown")
    title = re.search(r"^# (.+)$", first, re.M)
    summary = re.search(r"^> (.+)$", first, re.M)
    return (title[1] if title else path.stem), (summary[1] if summary else "")


def index_page(title: str, intro: str, folder: str, notebooks: list[Path]) -> str:
    "A section's page: its notebooks listed with their summaries, and the toctree that puts them in the navigation."
    rows = "\n".join(
        f"- [{number(path)} · {name}]({folder}/{path.name}): {summary}"
        for path in notebooks
        for name, summary in [title_and_summary(path)]
    )
    toc = "\n".join(f"{folder}/{path.stem}" for path in notebooks)
    return f"# {title}\n\n{intro}\n\n{rows}\n\n```{{toctree}}\n:hidden:\n\n{toc}\n```\n"


def sections(markdown: str, level: int) -> list[tuple[str, str]]:
    """`markdown` cut at its headings of `level` (outside code blocks): `[(heading, body)]`, with the text before them
    under the heading `''`."""
    parts, heading, lines, fenced = [], "", [], False
    for line in markdown.splitlines():
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("#" * level + " "):
            parts.append((heading, "\n".join(lines).strip()))
            heading, lines = line[level + 1 :].strip(), []
        else:
            lines.append(line)
    return parts + [(heading, "\n".join(lines).strip())]


# The markdown pages the site is built from, and where each lands on it: the README's set-up, the results in detail
# (the home page), the speed page and the developer guide (both on the set-up page)
README, RESULTS, SPEED, GUIDE = (
    ROOT / "README.md",
    ROOT / "figures" / "README.md",
    ROOT / "figures" / "SPEED.md",
    ROOT / "nbs" / "DEVELOPING.md",
)
ON_SITE = {
    "README.md": "setup.md",
    "figures/README.md": "index.md",
    "figures/SPEED.md": "setup.md#speed",
    "nbs/DEVELOPING.md": "setup.md#developer-guide",
}


def site_link(target: str, folder: str = "") -> str:
    """A link of a markdown page in `folder` (of the repository) pointed at its page or copy on the site: an executed
    notebook at its page, a chapter at its page, a CSV at its copy, a figure at its image, a page where it lands
    (`ON_SITE`). Any other link is left as it is."""
    if re.match(r"[a-z][\w+.-]*:|#", target):
        return target
    path, _, fragment = target.partition("#")
    try:
        repo = (ROOT / folder / path).resolve().relative_to(ROOT).as_posix()
    except ValueError:  # outside the repository
        return target
    patterns = [
        (r"figures/notebooks", "experiments.md"),
        (r"figures/notebooks/([\w-]+\.ipynb)", r"experiments/\1"),
        (r"nbs/experiments/([\w-]+\.ipynb)", r"experiments/\1"),
        (r"nbs/(\d[\w-]*\.ipynb)", r"library/\1"),
        (r"figures/([\w-]+\.csv)", r"data/\1"),
        (r"figures/([\w-]+\.png)", r"figures/\1"),
    ]
    if repo in ON_SITE:
        page = ON_SITE[repo]
        return f"{page.split('#')[0]}#{fragment}" if fragment else page
    for pattern, site in patterns:
        if m := re.fullmatch(pattern, repo):
            return m.expand(site) + (f"#{fragment}" if fragment else "")
    return target


def site_links(markdown: str, folder: str = "") -> str:
    "A markdown page's links (the page in `folder` of the repository) pointed at their pages and copies on the site."
    return re.sub(r"\]\(([^)\s]+)\)", lambda m: f"]({site_link(m[1], folder)})", markdown)


def named_files(heading: str) -> list[str]:
    "The files a results heading names in backticks, globs expanded against `figures/`."
    names = re.findall(r"`([^`]+\.(?:csv|png|ipynb))`", heading)
    return [p.name for n in names for p in (sorted((ROOT / "figures").glob(n)) if "*" in n else [Path(n)])]


def writer_of(names: list[str], notebooks: list[Path]) -> Path | None:
    """The notebook of `notebooks` named in `names`, or else the one whose cells name most of them; None if none
    names any."""
    if direct := [p for p in notebooks if p.name in names]:
        return direct[0]
    texts = {p: "\n".join(c.source for c in notebook(p).cells) for p in notebooks}
    score = {p: sum(n in text for n in names) for p, text in texts.items()}
    best = max(notebooks, key=score.get, default=None)
    return best if best is not None and score[best] else None


def sources() -> list[Path]:
    "The experiment notebooks as written (`nbs/experiments/`), which the runner executes into `figures/notebooks/`."
    return sorted((ROOT / "nbs" / "experiments").glob("*.ipynb"))


def experiment_of(heading: str) -> Path:
    """The executed experiment notebook that writes the files a results heading names. One the runner has not executed
    into figures/notebooks/ yet is named, with the command that does."""
    names = named_files(heading)
    if executed := writer_of(names, EXPERIMENTS):
        return executed
    if source := writer_of(names, sources()):
        raise RuntimeError(
            f"figures/notebooks/{source.name} is missing: figures/README.md's results section "
            f"{heading!r} quotes what {source.relative_to(ROOT)} writes. Run `posenc-reproduce --only "
            f"{source.stem}` to execute it there, then rerun make docs"
        )
    raise ValueError(
        f"figures/README.md's results section {heading!r} names no file an experiment notebook writes: name "
        "its figure or CSV in the heading, in backticks"
    )


def claim_section(heading: str, body: str) -> str:
    """One results section of figures/README.md on the home page: its findings, figure and tables, linked to its
    experiment."""
    experiment = experiment_of(heading)
    name, _ = title_and_summary(experiment)
    data = [n for n in named_files(heading) if n.endswith(".csv") and (ROOT / "figures" / n).is_file()]
    links = f"Experiment: [{number(experiment)} · {name}](experiments/{experiment.name})"
    if data:
        links += " · data: " + ", ".join(f"[{n}](data/{n})" for n in data)
    title = re.sub(r"\s*\(`.*$", "", heading)
    return f"## {title}\n\n{links}\n\n{site_links(body, 'figures')}\n"


def nested(markdown: str) -> str:
    "A page as a section of another: its headings (outside code blocks) one level down, `# Speed` as `## Speed`."
    lines, fenced = [], False
    for line in markdown.splitlines():
        fenced ^= line.startswith("```")
        lines.append("#" + line if not fenced and re.match(r"#+ ", line) else line)
    return "\n".join(lines).strip()


def readme_pages(
    readme: str, results: str | None = None, speed: str | None = None, guide: str | None = None
) -> dict[str, str]:
    """The home page (the paper's claim, then the claims table and the results of figures/README.md, claim by claim,
    each linked to its experiment, and the site's navigation) and the set-up page (the README's set-up, the cpu profile
    with its budget, the developer guide and the speed page). The pages not given are read from their files."""
    results, speed, guide = (
        page.read_text(encoding="utf-8") if text is None else text
        for page, text in ((RESULTS, results), (SPEED, speed), (GUIDE, guide))
    )
    top = sections(readme, 2)
    title, intro = re.match(r"# (.+?)\n+(.*)", top[0][1], re.S).groups()
    (_, about), *parts = sections(results, 2)
    about = "\n\n".join(about.split("\n\n")[2:])  # less its title and its first paragraph, which points to the README
    profile = [(h, b) for h, b in parts if h == "The cpu profile" or h.startswith("Budget")]
    home = [
        f"# {title}",
        intro,
        "What the cpu profile reproduces, claim by claim; the recipe and its budget are under "
        "[Set-up and profiles](setup.md#the-cpu-profile).",
        site_links(about, "figures"),
    ]
    home += [
        claim_section(h, b) if named_files(h) else f"## {h}\n\n{site_links(b, 'figures')}"
        for h, b in parts
        if (h, b) not in profile
    ]
    setup = [
        "# Set-up and profiles",
        *(site_links(f"## {h}\n\n{b}") for h, b in top[1:] if "<!-- generated:claims" not in b),
        *(site_links(f"{'##' if h == 'The cpu profile' else '###'} {h}\n\n{b}", "figures") for h, b in profile),
        site_links(nested(guide), "nbs"),
        site_links(nested(speed), "figures"),
    ]
    return {"index.md": "\n\n".join([*home, NAVIGATION]), "setup.md": "\n\n".join(setup)}


def figure(name: str) -> Path:
    "A figure of `figures/` that the README shows; a missing one is named, with the command that draws it."
    if (path := ROOT / "figures" / name).is_file():
        return path
    source = writer_of([name], sources())
    draw = (
        f"`posenc-reproduce --only {source.stem}` draws it"
        if source
        else "no experiment notebook draws it: fix the link"
    )
    raise RuntimeError(f"figures/{name} is missing, and the README shows it: {draw}; then rerun make docs")


def stage(into: Path = STAGE):
    "Write every page's source into `into` (emptied first): `_proc/site/`, which Sphinx builds."
    shutil.rmtree(into, ignore_errors=True)
    for folder in ("library", "experiments", "figures", "data"):
        (into / folder).mkdir(parents=True)
    pages = readme_pages(README.read_text(encoding="utf-8"))  # the README and its pages, as the home and set-up pages
    for image in set(re.findall(r"\]\(figures/([\w-]+\.png)\)", "\n".join(pages.values()))):
        shutil.copy2(figure(image), into / "figures" / image)
    for table in (ROOT / "figures").glob("*.csv"):
        shutil.copy2(table, into / "data" / table.name)
    for name, text in pages.items():
        (into / name).write_text(text, encoding="utf-8")
    for path in EXPERIMENTS:
        stage_experiment(path, into / "experiments" / path.name)
    for path in CHAPTERS:
        stage_chapter(path, into / "library" / path.name)
    (into / "experiments.md").write_text(
        index_page(
            "Experiments",
            "The experiment notebooks as `posenc-reproduce --profile cpu` executed them, each with its "
            "figures, tables and findings: first the positive arm, the check every claim is gated on; then the paper's "
            "figures and tables, in the paper's order; then what goes beyond the paper (the encodings that came after "
            "it, "
            "how NoPos counts, length generalisation on synthetic tasks).",
            "experiments",
            EXPERIMENTS,
        ),
        encoding="utf-8",
    )
    (into / "library.md").write_text(
        index_page(
            "Library",
            "The chapters of `posenc_nb`, each one module, with its "
            "examples' committed outputs and the API of what it exports.",
            "library",
            CHAPTERS,
        ),
        encoding="utf-8",
    )


def stale() -> bool:
    "Whether `_docs/` is missing or older than anything it is built from."
    built = OUT / "index.html"
    sources = [
        README,
        RESULTS,
        SPEED,
        GUIDE,
        *(p for p in SITE.iterdir() if p.is_file()),
        *CHAPTERS,
        *EXPERIMENTS,
        *(ROOT / "figures").glob("*.csv"),
        *(ROOT / "figures").glob("*.png"),
    ]
    return not built.is_file() or max(p.stat().st_mtime for p in sources) > built.stat().st_mtime


def build(argv=None):
    "Stage the pages, build them, and put the site in `_docs/`."
    from sphinx.cmd.build import build_main

    start = time.perf_counter()
    stage(STAGE)
    # Built beside the stage, then moved: MyST-NB writes its image files next to the build folder, not in it
    html = STAGE.parent / "html"
    shutil.rmtree(html, ignore_errors=True)
    status = build_main(
        [
            "-b",
            "html",
            "-q",
            "-j",
            "auto",
            "-c",
            str(SITE),
            "-d",
            str(STAGE.parent / "doctrees"),
            str(STAGE),
            str(html),
            *(argv or []),
        ]
    )
    if status:
        raise RuntimeError(f"Sphinx could not build the site (exit status {status}): its messages are above")
    shutil.rmtree(OUT, ignore_errors=True)
    shutil.move(html, OUT)
    print(f"site built in {time.perf_counter() - start:.0f} s: _docs/ (serve it with python -m http.server -d _docs)")


def main(argv=None) -> int:
    """`make docs`: build the site; its exit status (`posenc_nb.commands.EXIT_CODES`), a source it cannot use named
    in one paragraph on stderr."""
    return run_command("make docs", lambda: build(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
