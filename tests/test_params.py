"""Each shared parameter is declared once (probe/params.py): its API docstring entry, its command-line help,
probe batch's help and its range come from that one declaration, and a bad value reads the same from Python
and the command line (issue 49)."""
import ast
import inspect
import re

import pytest

import probe
from conftest import ROOT, run_cli
from probe import registry
from probe.batch import batch
from probe.cli.probes import batch_options, offered
from probe.params import PARAMS, check_number

BUILTIN = [p for p in registry.probes() if p.function.__module__.startswith("probe.probes.")]


def _raw_doc(p: registry.Probe) -> str:
    """The docstring of the probe's function as written in its module (before the declaration fills it)."""
    fn = inspect.unwrap(p.function)
    tree = ast.parse((ROOT / "probe" / "probes" / f"{fn.__module__.rsplit('.', 1)[1]}.py").read_text())
    return next(ast.get_docstring(n, clean=False) for n in tree.body
                if isinstance(n, ast.FunctionDef) and n.name == fn.__name__)


@pytest.mark.parametrize("p", BUILTIN, ids=[p.name for p in BUILTIN])
def test_a_probe_documents_a_declared_parameter_by_its_declaration(p):
    """A built-in probe's option is declared in probe/params.py, and its docstring entry is the declaration's
    ``{name}`` line; only a parameter the probe gives a meaning of its own (``Probe.options``) has its own."""
    doc = _raw_doc(p)
    for name in offered(p):
        assert name in PARAMS or name in p.options, f"{p.name}: --{name} is declared nowhere"
        by_line = re.search(rf"^\s*\{{{name}\}}", doc, re.M)
        if name not in p.options:
            assert by_line, f"{p.name}: {name} is documented by hand; write {{{name}}} (probe/params.py)"


def test_no_second_table_of_parameter_text():
    """OPTIONS, BATCH_HELP and docstrings.PARAMETERS were three tables of the same parameters: a dict literal
    keyed by three or more declared names, with text values, lives in probe/params.py alone (a probe's
    ``options``, the meanings it gives some, in its own module)."""
    found = []
    for folder in ("probe", "train"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "probe" / "params.py":
                continue
            tree = ast.parse(path.read_text())
            # a probe's own texts (Probe(options={...})): the meanings it gives a parameter, in its module
            own = {id(k.value) for n in ast.walk(tree) if isinstance(n, ast.Call) for k in n.keywords
                   if k.arg == "options"}
            for node in ast.walk(tree):
                if isinstance(node, ast.Dict) and id(node) not in own:
                    keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
                    texts = [v for v in node.values if isinstance(v, (ast.Constant, ast.JoinedStr, ast.Call))]
                    if len(keys & set(PARAMS)) >= 3 and texts:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_batch_help_comes_from_the_declarations():
    """probe batch's help of an option: its declaration's text for batch, else its help, after the names of
    the probes that take it where not all do (a probe's own text for it, if the first has one)."""
    for option in batch_options():
        p, text = PARAMS[option.name], option.help
        shown = p.help(None) if callable(p.help) else p.help
        own = {q.options[option.name] for q in registry.probes() if option.name in q.options}
        assert text.startswith(shown) if option.name == "tokens" else p.batch == text if p.batch else (
            text == shown or any(text.endswith(": " + t) for t in (shown, *own))), option.name


def test_a_range_is_said_in_the_docstring_and_the_help_as_checked():
    assert "top_k : int, default 3\n" in probe.align.__doc__ and "At least 1." in probe.align.__doc__
    with pytest.raises(probe.ProbeError, match=r"^top_k=0: need at least 1$"):
        check_number("top_k", 0)
    with pytest.raises(probe.ProbeError, match=r"^saturation=2.0: need between 0.0 and 1.0$"):
        check_number("saturation", 2.0)
    with pytest.raises(probe.ProbeError, match=r"^layer=1.5: need an integer$"):
        check_number("layer", 1.5)
    assert check_number("threads", 0) == 0


def test_a_bad_value_reads_the_same_from_python_the_command_line_and_batch(tiny_run):
    with pytest.raises(probe.ProbeError) as exc:
        probe.align(tiny_run, top_k=0)
    assert str(exc.value) == "top_k=0: need at least 1"
    res = run_cli("probe", "align", tiny_run, "--top-k", "0")
    assert res.returncode == 2 and res.stderr == "Error: --top-k 0: need at least 1\n"
    res = run_cli("probe", "batch", tiny_run, "--probe", "align", "--top-k", "0")
    assert res.returncode == 2 and res.stderr == "Error: --top-k 0: need at least 1\n" and res.stdout == ""
    with pytest.raises(probe.ProbeError, match=r"^top_k=0: need at least 1$"):
        batch([tiny_run], ["align"], {"top_k": 0})
