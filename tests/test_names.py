"""One name, one meaning (issue 49): a reader who has learnt what a name means in one module may rely on it
in the next. Checked with ``ast`` on probe/, train/ and schemas/ (no import: cheap)."""
import ast
from collections import defaultdict
from dataclasses import fields
from pathlib import Path

from conftest import ROOT

FILES = {str(p.relative_to(ROOT)): ast.parse(p.read_text())
         for folder in ("probe", "train", "schemas") for p in sorted((ROOT / folder).rglob("*.py"))}

# a public constant assigned in several modules on purpose, and why
SAME_NAME = {
    "PROBE": "each probe module's declaration: the name the registry and other packages' entry points look up",
    "MODELS": "the model kinds by name: train/config.py's tuple (no torch, checked in a config) and "
              "train/models.py's classes for the same names",
}
# the names that had two or three meanings: each means one thing now
MODULE_NAMES = ("render",)   # probe/render.py: results to stdout; no function is called so


def _constants(files: dict[str, ast.Module]) -> dict[str, dict[str, str]]:
    """Public UPPER_CASE module-level name -> {module: its value's ast dump}."""
    out: dict[str, dict[str, str]] = defaultdict(dict)
    for path, tree in files.items():
        for node in tree.body:
            if isinstance(node, ast.Assign):
                pairs = []
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        pairs.append((t, node.value))
                    elif isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple):
                        pairs += list(zip(t.elts, node.value.elts))
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                pairs = [(node.target, node.value)]
            else:
                continue
            for target, value in pairs:
                if isinstance(target, ast.Name) and target.id.isupper() and not target.id.startswith("_"):
                    out[target.id][path] = ast.dump(value)
    return out


def test_a_constant_name_has_one_value_everywhere():
    """``STEPS`` was a step grammar in one module and the number 10 in another, ``MAX_DEPTH`` 64 and 127:
    a module-level constant assigned in two modules holds the same value in both, or is listed above."""
    twice = {name: sorted(where) for name, where in _constants(FILES).items()
             if len(set(where.values())) > 1 and name not in SAME_NAME}
    assert twice == {}


def test_the_check_sees_a_name_with_two_values():
    found = _constants({"x.py": ast.parse("A, B = 1, 2\nC: int = 3\n_D = 4\n"),
                        "y.py": ast.parse("A = 5\nC: int = 3\n_D = 6\n")})
    assert len(set(found["A"].values())) == 2 and len(set(found["C"].values())) == 1 and "_D" not in found


def test_a_module_name_is_no_function_name():
    """``render`` was the table module, the parameter spelling of an error message and an SVG writer."""
    defs = {(node.name, path) for path, tree in FILES.items() for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in MODULE_NAMES}
    assert defs == set()


def test_progress_is_a_callable():
    """A parameter ``progress`` is the callable a long call reports to; a context manager on stderr is
    ``probe.cli.probes.status_line``; the trainers' switch for their bar is ``show_progress``."""
    switches, managers = set(), set()
    for path, tree in FILES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name == "progress":
                    managers.add(path)
                args = node.args
                for a, d in zip(args.kwonlyargs + args.args[::-1], args.kw_defaults + args.defaults[::-1]):
                    if a.arg == "progress" and isinstance(d, ast.Constant) and isinstance(d.value, bool):
                        switches.add(path)
    assert managers == set()
    assert switches == set()


def test_layout_is_a_checkpoint_family_and_style_a_table_style():
    from probe.registry import Probe

    assert "layout" not in {f.name for f in fields(Probe)} and "style" in {f.name for f in fields(Probe)}
    assert Path(ROOT / "probe" / "readers" / "layouts.py").exists()
