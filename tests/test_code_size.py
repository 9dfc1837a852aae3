"""Size limits of the library code: no module over 400 lines, no function over 80.

A module or function may be longer when its docstring has a line starting with ``Long because:``
that gives the reason (a declarative table, e.g. an argparse parser). Lines are counted as the
file has them (docstrings and comments included); a function from its ``def`` to its last line.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "surrogate"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
REASON = "Long because:"


def _has_reason(node) -> bool:
    doc = ast.get_docstring(node) or ""
    return any(line.strip().startswith(REASON) and len(line.strip()) > len(REASON) + 3 for line in doc.splitlines())


def too_long(path: Path) -> list[str]:
    """Offences of one file: 'path: N lines' for the module, 'path:line name: N lines' for functions."""
    text = path.read_text()
    tree = ast.parse(text, filename=str(path))
    rel = path.relative_to(ROOT.parent) if path.is_relative_to(ROOT.parent) else path
    out = []
    n = len(text.splitlines())
    if n > MAX_MODULE_LINES and not _has_reason(tree):
        out.append(f"{rel}: {n} lines (module limit {MAX_MODULE_LINES})")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES and not _has_reason(node):
                out.append(f"{rel}:{node.lineno} {node.name}: {length} lines (function limit {MAX_FUNCTION_LINES})")
    return out


def test_reason_line_is_recognized(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(90))
    f = tmp_path / "m.py"
    f.write_text(f'def f():\n    """Doc."""\n{body}\n')
    assert len(too_long(f)) == 1
    f.write_text(f'def f():\n    """Doc.\n\n    Long because: a table of ninety rows.\n    """\n{body}\n')
    assert too_long(f) == []
    f.write_text(f'def f():\n    """Doc.\n\n    Long because:\n    """\n{body}\n')  # a reason must be given
    assert len(too_long(f)) == 1


def test_no_module_or_function_over_the_limits():
    offences = [o for p in sorted(ROOT.rglob("*.py")) for o in too_long(p)]
    assert not offences, "over the size limits (split them, or give a 'Long because:' line):\n" + "\n".join(offences)
