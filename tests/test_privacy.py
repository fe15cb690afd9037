"""Privacy that holds (issue 49): a leading underscore means "this module's own", and the code keeps it.

- an underscore module (``probe/format/_h5.py``) is imported only by the modules of its own package;
- no module reads or sets an underscore attribute that another module defines (``other._x``, or
  ``getattr(other, "_x")``: a library's private state), save the standard library's documented names
  listed below (``os._exit``);
- no product code replaces a function or method at run time (``obj.method = wrapper(obj.method)``,
  a lambda, a function), save the standard library's documented hooks listed below;
- no name is imported only to be re-exported (``# noqa: F401``) outside a package's ``__init__``.

Read from the source with :mod:`ast`, as the layer rules in test_architecture.py are.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"probe": ROOT / "probe", "probe_train": ROOT / "train", "probe_schemas": ROOT / "schemas"}

# documented public names of the standard library and libraries that begin with an underscore
DOCUMENTED = {"_exit", "_getframe", "_replace", "_asdict", "_fields", "_make", "_field_defaults",
              "_value_", "_name_", "_missing_", "_generate_next_value_"}
# documented hooks a command line sets: Python's warning printer, the streams it wraps
HOOKS = {("warnings", "showwarning"), ("sys", "stdout"), ("sys", "stderr"), ("sys", "unraisablehook")}


def _modules():
    for pkg, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            yield ".".join([pkg, *parts]), path, path.name == "__init__.py"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _resolve(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _package_of(module: str) -> str:
    return module.rsplit(".", 1)[0]


def test_an_underscore_module_is_imported_by_its_own_package_only():
    found = []
    for module, path, is_pkg in _modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.ImportFrom):
                src = _resolve(module, is_pkg, node)
                targets = [src] + [f"{src}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                parts = t.split(".")
                for i, part in enumerate(parts):
                    if _private(part) and parts[0] in PACKAGES:
                        owner = ".".join(parts[:i])   # the package the underscore module belongs to
                        here = module if is_pkg else _package_of(module)
                        if here != owner and i < len(parts) - 1 or (here != owner and i == len(parts) - 1
                                                                   and _is_module(parts)):
                            found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {'.'.join(parts[:i + 1])}")
                        break
    assert sorted(set(found)) == []


def _is_module(parts: list[str]) -> bool:
    folder = PACKAGES[parts[0]].joinpath(*parts[1:])
    return folder.with_suffix(".py").is_file() or (folder / "__init__.py").is_file()


def _defined_here(tree: ast.AST) -> set[str]:
    """Underscore names this module defines: its functions, classes, attributes it sets, class bodies'."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if _private(n)}


def test_no_module_reads_another_objects_underscore_attribute():
    found = []
    for module, path, _ in _modules():
        tree = ast.parse(path.read_text())
        own = _defined_here(tree)
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Attribute) and _private(node.attr):
                name, owner = node.attr, ast.unparse(node.value)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in
                  ("getattr", "setattr", "hasattr") and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
                  and isinstance(node.args[1].value, str) and _private(node.args[1].value)):
                name, owner = node.args[1].value, ast.unparse(node.args[0])
            if name is None or name in DOCUMENTED or name in own:
                continue
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{name} of {owner}")
    assert found == []


def test_no_function_is_replaced_at_run_time():
    found = []
    for module, path, _ in _modules():
        tree = ast.parse(path.read_text())
        functions = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                if not isinstance(target, ast.Attribute):
                    continue
                owner, value = ast.unparse(target.value), node.value
                if owner in ("self", "cls") or (owner, target.attr) in HOOKS or target.attr.startswith("__"):
                    continue
                wraps = isinstance(value, ast.Call) and any(ast.unparse(a) == ast.unparse(target) for a in value.args)
                if wraps or isinstance(value, ast.Lambda) or (isinstance(value, ast.Name) and value.id in functions):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} replaces {owner}.{target.attr}")
    assert found == []


def test_no_name_is_imported_only_to_be_exported_again():
    found = []
    for module, path, is_pkg in _modules():
        if is_pkg:
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if "import" in line and "noqa" in line and "F401" in line:
                found.append(f"{path.relative_to(ROOT)}:{i}")
    assert found == []
