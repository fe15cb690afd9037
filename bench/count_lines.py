"""Lines of the product code, as issue 36 counts them: every ``*.py`` under ``probe/`` and ``train/``, in
total and as code lines (not a docstring, a comment or a blank line).

    python bench/count_lines.py [CHECKOUT] [-v]

``CHECKOUT`` defaults to this one (another commit: ``git worktree add /tmp/old REV``); ``-v`` lists every
file, largest first. A docstring is any string statement (module, class, function, or a bare string
standing alone), found with :mod:`ast`.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path


def count(path: Path) -> tuple[int, int]:
    """(total lines, code lines) of one file."""
    src = path.read_text()
    docs: set[int] = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            docs.update(range(node.lineno, node.end_lineno + 1))
    lines = src.splitlines()
    code = sum(1 for i, line in enumerate(lines, 1)
               if line.strip() and not line.strip().startswith("#") and i not in docs)
    return len(lines), code


def main(argv: list[str]) -> None:
    args = [a for a in argv if a != "-v"]
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent
    files = sorted([*root.glob("probe/**/*.py"), *root.glob("train/**/*.py")])
    rows = [(*count(f), str(f.relative_to(root))) for f in files]
    if "-v" in argv:
        for total, code, name in sorted(rows, reverse=True):
            print(f"{total:6d} {code:6d} {name}")
    print(f"files {len(rows)} total {sum(r[0] for r in rows)} code {sum(r[1] for r in rows)}")


if __name__ == "__main__":
    main(sys.argv[1:])
