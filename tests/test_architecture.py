"""The layer rules of ARCHITECTURE.md, checked on the import graph (every import statement,
at module level or inside a function, read with ``ast``)."""
import ast
import re
from pathlib import Path

import pytest

from conftest import ROOT

# installed import name -> repository folder (pyproject's package-dir mapping)
FOLDERS = {"probe": "probe", "probe_train": "train", "probe_schemas": "schemas"}
PACKAGES = tuple(FOLDERS)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    parts[0] = {folder: name for name, folder in FOLDERS.items()}[parts[0]]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(name: str) -> bool:
    first, *rest = name.split(".")
    p = ROOT.joinpath(FOLDERS.get(first, first), *rest)
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(absolute module imported, at module level?) for every import in ``path``."""
    mod = _module_name(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    for n in tree.body:  # imports under a module-level `if`/`try` still run at import time
        if isinstance(n, (ast.If, ast.Try)):
            top |= {id(x) for x in ast.walk(n)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.append((sub if _is_module(sub) else target, id(node) in top))
    return [(name, level) for name, level in out if name.split(".")[0] in PACKAGES]


GRAPH = {_module_name(p): _imports(p) for pkg in FOLDERS.values() for p in sorted((ROOT / pkg).rglob("*.py"))}


def _in(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _violations(importers: str, allowed) -> list[str]:
    return [f"{m} imports {t}" for m, imps in GRAPH.items() if _in(m, importers)
            for t, _ in imps if not allowed(m, t)]


def test_the_graph_sees_the_whole_tree():
    assert {"probe.api", "probe.cli", "probe.format.run", "probe.readers.layouts", "probe.analyses.stats",
            "probe_train.tasks.lm", "probe_train.runs", "probe_train.evaluate"} <= set(GRAPH)
    assert ("probe.format", True) in GRAPH["probe.api"]          # relative imports are resolved


def test_rule1_analyses_import_only_analyses():
    # and probe.errors, lazily: the one ProbeError of the math's layer (to_frame() without pandas)
    assert _violations("probe.analyses", lambda m, t: _in(t, "probe.analyses", "probe.errors")) == []
    assert all(not top for m, imps in GRAPH.items() if _in(m, "probe.analyses") for t, top in imps
               if _in(t, "probe.errors"))


def test_rule2_format_imports_only_schemas_and_errors():
    # and probe.files, the one check that a path is a regular file before anything opens it, and
    # probe.limits, the one depth limit of JSON (a run's attributes) and memory budget
    assert _violations("probe.format", lambda m, t: _in(t, "probe_schemas", "probe.errors", "probe.format",
                                                          "probe.files", "probe.limits")) == []


def test_rule3_readers_never_import_train_api_or_cli():
    assert _violations("probe.readers", lambda m, t: not _in(t, "probe_train", "probe.api", "probe.cli")) == []


def test_rule4_api_never_imports_the_cli_and_the_cli_reaches_readers_only_through_the_api():
    assert _violations("probe.api", lambda m, t: not _in(t, "probe.cli")) == []
    assert _violations("probe.probes", lambda m, t: not _in(t, "probe.cli")) == []
    assert _violations("probe.cli", lambda m, t: not _in(t, "probe.readers", "probe.format", "probe_train")) == []


def test_rule5_probe_imports_train_in_exactly_two_places():
    places = {(m, t) for m, imps in GRAPH.items() if _in(m, "probe") for t, _ in imps if _in(t, "probe_train")}
    figures = {(m, t) for m, t in places if _in(m, "probe.figures")}
    assert places - figures == {("probe.probes.ood", "probe_train.evaluate")}
    assert {t for _, t in figures} == {"probe_train.runs", "probe_train.speeds", "probe_train.config",
                                       "probe_train.text.kjv"}
    assert all(not top for m, imps in GRAPH.items() if _in(m, "probe") for t, top in imps if _in(t, "probe_train")), \
        "probe imports train lazily, inside the functions that need it"


def test_rule6_train_imports_only_errors_format_and_words_of_probe():
    # and probe.registry, plain data: the probe names probe-train --tensorboard-probes checks up front
    # and probe.limits: the one depth limit of JSON a user's file holds (a JSONL story file)
    # and probe.jobs: the one job runner, local or on a Dask cluster (batch, sweeps and figures alike)
    # and the leaves that say a result as probe does, for probe-train coord-check (a check that trains):
    # probe.analyses (the math: its slope against the width over seeds is regime --widths'), probe.chart
    # (its picture) and probe.render (its table, JSON and CSV); none of them reads a file or imports train
    allowed = ("probe.errors", "probe.signals", "probe.format", "probe.readers.words", "probe.children", "probe.files",
               "probe.jobs", "probe.registry", "probe.limits", "probe.environment", "probe.analyses", "probe.chart",
               "probe.render")
    assert _violations("probe_train", lambda m, t: not _in(t, "probe") or _in(t, *allowed)) == []


def test_rule9_chart_imports_neither_the_report_nor_the_probes():
    # one picture, two renderers: the probes describe with chart/, the report and --plot draw with it
    assert _violations("probe.chart", lambda m, t: not _in(t, "probe.report", "probe.probes", "probe.api",
                                                             "probe.cli")) == []


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    state, cycles = {}, []

    def visit(m, stack):
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycles.append(" -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                visit(t, stack + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return cycles


def test_no_import_cycles_at_module_level():
    graph = {m: {t for t, top in imps if top and t in GRAPH and t != m} for m, imps in GRAPH.items()}

    def parents(m):  # importing a.b.c runs a/__init__ and a.b/__init__ first
        parts = m.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts))} & set(GRAPH)

    for m in graph:
        graph[m] |= {p for t in list(graph[m]) for p in parents(t) if p != m and not _in(m, p)}
    assert _cycles(graph) == []


def test_no_import_circle_between_files_even_inside_functions():
    """Two files that import each other (one of them inside a function, to dodge the import-time
    error) are one concept split badly: the shared part gets a module of its own. A package's
    ``__init__`` that re-exports lazily (PEP 562, an import inside ``__getattr__``) is not part of one."""
    packages = {m for m in GRAPH if (ROOT / FOLDERS[m.split(".")[0]]).joinpath(*m.split(".")[1:], "__init__.py").exists()}
    graph = {m: {t for t, top in imps if t in GRAPH and t != m and (top or m not in packages)}
             for m, imps in GRAPH.items()}
    assert _cycles(graph) == []


def test_the_circle_test_sees_a_circle_inside_a_function():
    graph = {"a": {"b"}, "b": {"a"}, "c": set()}
    assert _cycles(graph) == ["a -> b -> a"]


@pytest.mark.parametrize("folder", ["probe/api", "probe/probes", "probe/format", "probe/readers", "probe/analyses", "probe/cli", "train/tasks",
                                    "train/text"])
def test_the_tree_has_the_rooms_of_the_architecture(folder):
    assert (ROOT / folder / "__init__.py").exists()
    for name in ("probe/api/__init__.py", "probe/api/selection.py", "probe/api/checks.py", "probe/api/finite.py", "probe/source.py", "probe/batch.py", "probe/chart/mpl.py", "probe/chart/svg.py", "probe/figures/context.py", "probe/errors.py",
                 "probe/registry.py", "probe/sweeps.py", "probe/files.py", "probe/format/_h5.py", "probe/format/run.py",
                 "probe/format/writer.py", "probe/format/validate.py", "probe/format/sweep.py",
                 "probe/readers/names.py", "probe/cli/options.py", "probe/render.py", "probe/cli/probes.py", "probe/probes/__init__.py",
                 "probe/analyses/stats.py", "train/runs.py", "train/device.py", "train/evaluate.py",
                 "train/trainer.py", "train/tasks/base.py", "train/tasks/anchor.py", "train/tasks/composite.py",
                 "train/tasks/lm.py"):
        assert (ROOT / name).exists(), name


def test_tests_wait_for_events_not_for_time():
    """A sleep followed by an assertion passes only on a machine as slow as the one it was tuned on
    (tests/README.md): tests wait through tests/waiting.py, which polls for an event."""
    sleepers = [p.name for p in sorted((ROOT / "tests").glob("*.py"))
                if p.name != "waiting.py" and re.search(r"\bsleep\(", p.read_text())]
    assert sleepers == []


def _code_lines(path: Path) -> int:
    """Lines of code: not blank, not a comment, not in a docstring. Numpydoc sections (Parameters,
    Returns with shapes, Attributes) make a documented module long without giving it a second concept."""
    src = path.read_text()
    doc = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                doc.update(range(first.lineno, first.end_lineno + 1))
    return sum(1 for i, ln in enumerate(src.splitlines(), 1)
               if i not in doc and ln.strip() and not ln.lstrip().startswith("#"))


def test_no_file_holds_more_than_one_room():
    """A module over 380 lines of code has grown a second concept: split it (ARCHITECTURE.md). (Until
    the docstrings became numpydoc, the rule was 500 lines in all; the largest modules then held
    ~350-370 lines of code.)"""
    long = {str(p.relative_to(ROOT)): n for folder in ("probe", "train") for p in sorted((ROOT / folder).rglob("*.py"))
            if (n := _code_lines(p)) > 380}
    assert long == {}


def test_architecture_md_names_every_room():
    """ARCHITECTURE.md's layout block stays true: every module and folder of probe/ and train/ is in it."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    block = text[text.index("```"):text.index("```", text.index("```") + 3)]
    for pkg in ("probe", "train"):
        for p in sorted((ROOT / pkg).iterdir()):
            if p.name.startswith("__") or p.name == "_entry.py" or p.suffix not in (".py", ""):
                continue
            name = p.name + "/" if p.is_dir() else p.name
            assert name in block, f"{pkg}/{name} missing from ARCHITECTURE.md's layout"


def test_no_underscore_name_is_imported_from_another_module():
    """A name another module needs is public where it lives (or moves): ``from .x import _y`` hides a
    dependency behind a name that says "nobody else uses this"."""
    found = []
    for folder in ("probe", "train"):
        for p in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(p.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                    found += [f"{p.relative_to(ROOT)}:{node.lineno}: {a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []


def test_one_module_handles_the_stop_signals():
    """One way to stop (probe/signals.py): no other module installs a signal handler or masks the
    signals, and no child is handed code with ``-c`` (it runs the installed console script)."""
    found = []
    for folder in ("probe", "train"):
        for p in sorted((ROOT / folder).rglob("*.py")):
            if p == ROOT / "probe" / "signals.py":
                continue
            for node in ast.walk(ast.parse(p.read_text())):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "signal" \
                        and node.attr in ("signal", "pthread_sigmask", "set_wakeup_fd", "siginterrupt"):
                    found.append(f"{p.relative_to(ROOT)}:{node.lineno} signal.{node.attr}")
                if isinstance(node, ast.Constant) and node.value == "-c":
                    found.append(f"{p.relative_to(ROOT)}:{node.lineno} -c")
    assert found == []


# --- the rooms and who imports whom, as ARCHITECTURE.md shows them (made here, checked here) ----------

ROOMS_BEGIN = "<!-- rooms: made by `python tests/test_architecture.py` from the import graph -->"
ROOMS_END = "<!-- /rooms -->"


def _room(module: str) -> str:
    """A module's room: its folder under the package (``probe/format/``), or the module (``probe/errors.py``)."""
    first, *rest = module.split(".")
    folder = FOLDERS[first]
    if not rest:
        return f"{folder}/__init__.py"
    return f"{folder}/{rest[0]}/" if (ROOT / folder / rest[0]).is_dir() else f"{folder}/{rest[0]}.py"


def rooms_table() -> str:
    """Each room, the rooms it imports (at module level or inside a function) and how many rooms import it."""
    edges: dict[str, set[str]] = {}
    for m, imps in GRAPH.items():
        edges.setdefault(_room(m), set()).update(r for t, _ in imps if (r := _room(t)) != _room(m))
    by = {r: sum(r in e for e in edges.values()) for r in edges}
    order = sorted(edges, key=lambda r: (list(FOLDERS.values()).index(r.split("/")[0]), r.endswith(".py"), r))
    lines = ["| room | imports | imported by |", "|---|---|---|"]
    lines += [f"| `{r}` | {', '.join(f'`{t}`' for t in sorted(edges[r], key=order.index)) or '—'} | {by[r]} |"
              for r in order]
    return "\n".join(lines)


def _rooms_block(text: str) -> str:
    return text[text.index(ROOMS_BEGIN) + len(ROOMS_BEGIN):text.index(ROOMS_END)].strip()


def test_architecture_md_shows_the_rooms_the_import_graph_has():
    """The page's table of rooms is the import graph's, to the last import: a change that adds an import
    between rooms changes the page (``python tests/test_architecture.py`` rewrites the table)."""
    assert _rooms_block((ROOT / "ARCHITECTURE.md").read_text()) == rooms_table()


def test_the_site_shows_the_one_architecture_page():
    """One page, ARCHITECTURE.md: the site's architecture page includes it whole (pymdownx.snippets)."""
    assert (ROOT / "docs" / "explanation" / "architecture.md").read_text() == '--8<-- "ARCHITECTURE.md"\n'
    assert "[the architecture](ARCHITECTURE.md)" in (ROOT / "README.md").read_text()
    assert "[ARCHITECTURE.md](ARCHITECTURE.md)" in (ROOT / "CONTRIBUTING.md").read_text()


if __name__ == "__main__":   # rewrite ARCHITECTURE.md's table of rooms from the import graph
    page = ROOT / "ARCHITECTURE.md"
    text = page.read_text()
    head, tail = text[:text.index(ROOMS_BEGIN) + len(ROOMS_BEGIN)], text[text.index(ROOMS_END):]
    page.write_text(f"{head}\n{rooms_table()}\n{tail}")
    print("ARCHITECTURE.md: rooms table", "unchanged" if _rooms_block(text) == rooms_table() else "rewritten")
