"""What untrusted input may cost: the memory budget a read must fit, and how deep a JSON or YAML file
may nest.

A file's header says how big its tensors are, and a consistent header is no proof: a sparse file can
declare a 4 TiB tensor in a few kilobytes. So every read of a whole tensor (or of many rows) is checked
against a budget before anything is allocated, and refused in one line that names the tensor, its size,
the budget and ``max_memory`` (``--max-memory``), the setting that raises it. The budget is one
:class:`~contextvars.ContextVar` that each probe sets from its ``max_memory`` argument
(:func:`budgeted`): the readers that check it sit several calls below the API, and a parameter threaded
through every reader and source between them would be a second copy of the same number. Worker threads
start with the default context, so a thread pool runs its calls in a copy of the caller's
(:func:`in_context`).

JSON and YAML files are parsed by :func:`parse_json` and :func:`parse_yaml`, which refuse a document
nested deeper than :data:`MAX_DEPTH` levels in one line instead of a ``RecursionError``.
"""
from __future__ import annotations

import contextvars
import functools
import inspect
import math
import os
import re
from contextlib import suppress

from .errors import ProbeError, param

MAX_DEPTH = 64          # nesting levels a JSON or YAML input may have (configs and groups files use 2-4)
MAX_MEMORY = None       # the default budget: half of the memory this process can have (default_budget)

#: What a decomposition of a matrix holds besides the float32 matrix read, in multiples of it: its float64
#: copy (2) and a float64 working copy of the same order (the Gram matrix of the shorter side, or the copy
#: LAPACK overwrites: 2)
DECOMPOSITION = 4
FLOAT64 = 2             # a float64 copy of it (cosines of unit rows, a centred copy)
WHY = "with its float64 working copies"

_BUDGET: contextvars.ContextVar[int | None] = contextvars.ContextVar("probe_max_memory", default=None)
_UNITS = {"": 1, "b": 1, "k": 2 ** 10, "m": 2 ** 20, "g": 2 ** 30, "t": 2 ** 40,
          "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40,
          "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12}


class OverBudget(ProbeError):
    """A read refused by the memory budget (a probe that can leave the tensor out catches it); ``fact`` is
    the message without the advice, for a warning that says what was left out."""

    def __init__(self, fact: str):
        super().__init__(f"{fact}; raise it with {param('max_memory')}")
        self.fact = fact


# --- the memory budget ------------------------------------------------------------------------------

def parse_size(value) -> int:
    """Bytes from ``value``: an int, or a number with an optional unit (``512MB``, ``8GiB``, ``4G``: K, M, G
    and T alone are binary, as ``free -g`` counts)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return int(value)
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?i?b?)\s*", value, re.I) if isinstance(value, str) else None
    if m is None or m.group(2).lower() not in _UNITS or float(m.group(1)) <= 0:
        raise ProbeError(f"{param('max_memory', value)}: need a size such as 512MB, 8GiB or a number of bytes")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _cgroup_limit() -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        with suppress(OSError), open(path) as fh:
            text = fh.read().strip()
            if text.isdigit():
                return int(text)
    return None


def default_budget() -> int:
    """Half of the memory this process can have: the smallest of physical memory, its cgroup's limit and
    its address-space limit (``ulimit -v``). Half, because the probe's own arrays are not all it holds
    (the interpreter, numpy, torch, the file's buffers, a second tensor read while the first is alive)."""
    limits = []
    with suppress(ValueError, OSError, AttributeError):
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    limits.append(_cgroup_limit())
    with suppress(ImportError, OSError, ValueError):
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        limits.append(None if soft == resource.RLIM_INFINITY else soft)
    known = [n for n in limits if n]
    return min(known) // 2 if known else 8 * 2 ** 30


def budget() -> int:
    """The memory budget in force (bytes)."""
    value = _BUDGET.get()
    return default_budget() if value is None else value


def budgeted(fn):
    """A probe whose reads check its ``max_memory`` argument (see the module's docstring): the budget
    ``max_memory`` (``None``: :func:`default_budget`) holds for the reads inside the call."""
    signature = inspect.signature(fn)
    default = signature.parameters["max_memory"].default

    @functools.wraps(fn)
    def call(*args, **kwargs):
        given = signature.bind(*args, **kwargs).arguments
        max_memory = given.get("max_memory", default)
        token = _BUDGET.set(None if max_memory is None else parse_size(max_memory))
        try:
            return fn(*args, **kwargs)
        except MemoryError as exc:   # more than the machine gives, within the budget: still one line
            detail = " ".join(str(exc).split()) or "MemoryError"
            raise ProbeError(f"{os.fspath(given.get('path', '?'))}: out of memory ({detail}) within the memory "
                             f"budget of {human(budget())}; lower it with {param('max_memory')} to be "
                             "refused before reading") from None
        finally:
            _BUDGET.reset(token)
    return call


def in_context(fn):
    """``fn`` to be called in another thread with this thread's budget (a copy of its context each call)."""
    ctx = contextvars.copy_context()
    return lambda *args: ctx.copy().run(fn, *args)


def human(n: float) -> str:
    """Bytes as a person reads them: ``4.0 TiB``, ``59.6 GiB``, ``512 B``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024:
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def check(where, name: str, shape, dtype: str, itemsize: int, *, need: int = 0, why: str = "", at: str = "") -> None:
    """Refuse, before anything is allocated, to read tensor ``name`` (``shape``, ``dtype`` of ``itemsize`` bytes,
    as the file stores it; ``at``: which snapshots) when its size, or the ``need`` (bytes) of what is made of
    it (``why``: a bf16 tensor widened to float32, a decomposition's float64 copies), is over the budget."""
    size = math.prod(int(d) for d in shape) * itemsize
    limit = budget()
    if max(size, need) <= limit:
        return
    dims = " x ".join(str(int(d)) for d in shape) or "a scalar"
    also = f" and needs {human(need)}{' ' + why if why else ''}" if need > size else ""
    raise OverBudget(f"{os.fspath(where)}: tensor '{name}'{at} is {human(size)} ({dims} {dtype}){also}, over the "
                     f"memory budget of {human(limit)}")


def check_total(where, what: str, need: int) -> None:
    """:func:`check` for what is not one tensor (a model and its activations): ``what`` needs ``need`` bytes."""
    limit = budget()
    if need > limit:
        raise OverBudget(f"{os.fspath(where)}: {what} needs {human(need)}, over the memory budget of {human(limit)}")


# --- nesting ---------------------------------------------------------------------------------------

def _depth_ok(doc) -> bool:
    """Whether ``doc`` nests at most MAX_DEPTH containers deep: a walk level by level, without recursion, in
    which a container reached twice (a YAML alias) is walked once."""
    level, seen = [doc], set()
    for _ in range(MAX_DEPTH):
        inner = []
        for x in level:
            if isinstance(x, (dict, list)) and id(x) not in seen:
                seen.add(id(x))
                inner += [c for c in (x.values() if isinstance(x, dict) else x) if isinstance(c, (dict, list))]
        if not inner:
            return True
        level = inner
    return False


def _within_depth(load, text, where, what: str):
    """``load(text)``, refusing a document nested deeper than MAX_DEPTH levels (the parser's
    RecursionError, or a walk of what it returned)."""
    with suppress(RecursionError):
        doc = load(text)
        if _depth_ok(doc):
            return doc
    raise ProbeError(f"{os.fspath(where)}: {what} nested deeper than {MAX_DEPTH} levels")


def parse_json(text: str | bytes, where, what: str = "JSON", **kw):
    """``json.loads(text, **kw)`` with :func:`_within_depth`'s depth limit; a syntax error is json's ``ValueError``."""
    import json

    return _within_depth(lambda t: json.loads(t, **kw), text, where, what)


def parse_yaml(text: str, where, what: str = "YAML"):
    """``yaml.safe_load(text)`` with the depth limit of :func:`parse_json`; a syntax error is PyYAML's
    ``YAMLError``."""
    import yaml

    return _within_depth(yaml.safe_load, text, where, what)


def load_json(fh, where, what: str = "JSON"):
    """:func:`parse_json` of an open file."""
    return parse_json(fh.read(), where, what)
