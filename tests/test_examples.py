"The chapters' example cells are tests (`nbdev_test`): each check in them must be able to fail."

import ast
import json
from pathlib import Path

NBS = Path(__file__).parents[1] / "nbs"


def _checks(body) -> bool:
    "Whether statements `body` hold a check: an assert, or a call of a fastcore `test_*` function."
    return any(
        isinstance(n, ast.Assert) or isinstance(n, ast.Call) and getattr(n.func, "id", "").startswith("test_")
        for stmt in body
        for n in ast.walk(stmt)
    )


def _raises(body) -> bool:
    return any(isinstance(n, ast.Raise) for stmt in body for n in ast.walk(stmt))


def checks_that_cannot_fail(source: str) -> list[int]:
    """Lines of each `try` whose `except` holds the check while nothing fails when no error is raised: no `else`, no
    raise in the `try` body, and no raise right after it."""
    tree, found = ast.parse(source), []
    for parent in ast.walk(tree):
        body = getattr(parent, "body", None)
        for i, stmt in enumerate(body if isinstance(body, list) else []):
            if (
                isinstance(stmt, ast.Try)
                and any(_checks(h.body) for h in stmt.handlers)
                and not (stmt.orelse or _raises(stmt.body) or i + 1 < len(body) and isinstance(body[i + 1], ast.Raise))
            ):
                found.append(stmt.lineno)
    return found


def example_cells():
    "Every code cell of every chapter that exports nothing: `(chapter, cell id, source)`, magics left out."
    for path in sorted(NBS.glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and "| export" not in source.split("\n", 1)[0]:
                yield (
                    path.name,
                    cell.get("id"),
                    "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))),
                )


def test_the_rule_finds_a_check_that_cannot_fail():
    assert checks_that_cannot_fail("try: f()\nexcept ValueError as e: test_eq(e.args, (1,))") == [1]
    assert checks_that_cannot_fail("try: f()\nexcept ValueError as e: assert e\nelse: raise AssertionError") == []
    assert checks_that_cannot_fail("try:\n    f()\n    raise AssertionError('no error')\nexcept ValueError: pass") == []
    assert (
        checks_that_cannot_fail(
            "def g():\n    try: f()\n    except ValueError as e: assert e\n    raise AssertionError"
        )
        == []
    )
    assert (
        checks_that_cannot_fail("try: f()\nexcept ValueError: print('either is fine')") == []
    )  # no check in the handler


def test_every_example_check_can_fail():
    found = [
        f"{chapter} cell {cell}, line {line}"
        for chapter, cell, source in example_cells()
        for line in checks_that_cannot_fail(source)
    ]
    assert not found, (
        f"a try whose except holds the check passes when nothing is raised: {found}; use test_fail, or else: raise"
    )
