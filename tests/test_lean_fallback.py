"""probe/cli/_lean.py sets Typer's private per-option converter (``_runtime_param``, beside
``type_descriptor``: Typer >= 0.29) so that plain options convert without pydantic. Where those
private names are absent (an older Typer, a later one that renamed them) every option stays on Typer's
own conversion. Both ways run here: the guard on parameters of every shape, and the command line
end to end with the private slot used and with it left alone, giving the same results and errors.
(bench/check_floors.py also runs the suite's CLI tests on the Typer floor, which has no such slot.)"""
from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from probe.cli._lean import _hooks, lighten

# The probe CLI, run through the lean build; "typer" mode makes the private slot look absent, as on
# an older Typer, so that Typer converts every option itself.
CHILD = r"""
import json, sys
mode, argv = sys.argv[1], sys.argv[2:]
from probe.cli import _lean, app
if mode == "typer":
    _lean._hooks = lambda param: None
from probe.errors import run_cli
sys.argv = ["probe", *argv]
try:
    run_cli(_lean.lean_command(app))
finally:
    sys.stderr.write("\n" + json.dumps({"pydantic": "pydantic" in sys.modules}) + "\n")
"""


def _probe(mode: str, *args) -> tuple[int, str, str, bool]:
    res = subprocess.run([sys.executable, "-c", CHILD, mode, *args], capture_output=True, text=True, timeout=120)
    err, tail = res.stderr.rstrip().rsplit("\n", 1)
    return res.returncode, res.stdout, err.strip(), json.loads(tail)["pydantic"]


def _desc(**fields):
    base = dict(annotation=int, parameter_info=SimpleNamespace(min=1, max=None), file_annotation=None)
    return SimpleNamespace(**{**base, **fields})


def test_the_guard_uses_the_slot_only_where_typer_has_it():
    full = SimpleNamespace(type_descriptor=_desc(), _runtime_param=None)
    assert _hooks(full) is full.type_descriptor
    assert _hooks(SimpleNamespace()) is None                                    # Typer < 0.29: no descriptor
    assert _hooks(SimpleNamespace(type_descriptor=_desc())) is None              # a descriptor, no slot
    assert _hooks(SimpleNamespace(type_descriptor=_desc(), _runtime_param=object())) is None   # already built
    renamed = SimpleNamespace(type_descriptor=SimpleNamespace(annotation=int), _runtime_param=None)
    assert _hooks(renamed) is None                                               # fields renamed
    old, new = SimpleNamespace(), SimpleNamespace(type_descriptor=_desc(), _runtime_param=None)
    lighten([old, new, renamed])
    assert vars(old) == {} and renamed._runtime_param is None                   # left to Typer
    assert new._runtime_param is not None and new._runtime_param.coerce("3", SimpleNamespace(
        multiple=False, nargs=1), None) == 3


@pytest.mark.parametrize("args, rc, fragment", [
    (["figures", "--list", "--seeds", "2"], 0, None),
    (["figures", "--list", "--seeds", "abc"], 2, "'--seeds'"),
    (["figures", "--list", "--seeds", "-1"], 2, "'--seeds'"),
    (["rank", "x.h5", "--minima", "maybe"], 2, "unexpected extra argument"),
])
def test_the_command_line_is_the_same_both_ways(args, rc, fragment):
    lean = _probe("lean", *args)
    typer = _probe("typer", *args)
    for got in (lean, typer):
        assert got[0] == rc, got
        if fragment:
            lines = got[2].splitlines()
            assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], got
    assert lean[1] == typer[1]                                # the same output
    if rc == 0:
        # Typer >= 0.29 converts through pydantic, the lean build does not; older Typer never does
        assert (lean[3], typer[3]) == (False, _typer_has_slot()), (lean[3], typer[3])


def _typer_has_slot() -> bool:
    import inspect

    from typer.core import TyperOption

    return "type_descriptor" in inspect.signature(TyperOption.__init__).parameters
