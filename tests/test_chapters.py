"The chapters read in order: each imports only modules whose chapters come before it (the README's bands)."

import json
import re
from pathlib import Path

NBS = Path(__file__).parents[1] / "nbs"


def chapters() -> dict[str, tuple[str, set[str]]]:
    "`{chapter: (module, modules its exported cells import)}`, chapters in their reading order (their file names)."
    found = {}
    for path in sorted(NBS.glob("*.ipynb")):
        sources = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        module = next(m[1] for s in sources if (m := re.search(r"#\s*\|\s*default_exp\s+(\w+)", s)))
        exported = "\n".join(s for s in sources if re.match(r"#\s*\|\s*export", s))
        found[path.stem] = module, set(re.findall(r"(?:from|import) posenc_nb\.(\w+)", exported)) - {module}
    return found


def later_imports(found: dict[str, tuple[str, set[str]]]) -> list[str]:
    "Each `chapter imports module (its chapter)` where that module's chapter comes after the importing one."
    order = list(found)
    chapter_of = {module: chapter for chapter, (module, _) in found.items()}
    return [
        f"{chapter} imports {m} ({chapter_of[m]})"
        for chapter, (_, imports) in found.items()
        for m in sorted(imports)
        if m in chapter_of and order.index(chapter_of[m]) > order.index(chapter)
    ]


def test_the_rule_finds_an_import_of_a_later_chapter():
    found = {"00_base": ("base", set()), "01_top": ("top", {"base", "later"}), "02_later": ("later", {"base"})}
    assert later_imports(found) == ["01_top imports later (02_later)"]


def test_no_chapter_imports_a_later_one():
    found = chapters()
    assert len(found) > 30 and not later_imports(found), later_imports(found)
