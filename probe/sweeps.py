"""``probe sweep-summary``: a sweep's runs (``probe-train sweep``'s manifest, :mod:`probe.format.sweep`)
summarised per grid cell over its seeds, and the two small grammars of its options: a metric
(``acc[SPLIT]``, ``loss[SPLIT]``, ``train_loss``, or ``PROBE(OPTIONS):NAME`` such as
``similarity(tokens=logic):mean_offdiag``) and an outcome (``A>B``, ``A<B``, ``A>=B``, ``A<=B``).
"""
from __future__ import annotations

import inspect
import math
import os
import re
import warnings

from . import registry
from .errors import ProbeError, ProbeWarning, did_you_mean, param
from .format import Run
from .format.sweep import read_manifest

SEED_FIELDS = ("seed", "data_seed")
_OUTCOME = re.compile(r"^\s*(.+?)\s*(>=|<=|>|<)\s*(.+?)\s*$")
_DEFAULT_OUTCOMES = {"composite": ["acc[ood_inferential]>acc[ood_symmetric]"], "anchor": ["acc[rsn_test]>0.5"]}


def _run_value(file: str, run, name: str, index: int, cache: dict, probe_function, where: str):
    """A number of one run at snapshot ``index``: a logged metric (acc[split], loss[split],
    train_loss) or a probe's summary number (probe:name, e.g. similarity:distance_corr). ``where`` is
    the option that holds ``name`` (``param('metric', name)`` or ``param('outcome', text)``), so that
    an error blames the option the user wrote the term in."""
    if ":" in name:
        call, _, key = name.rpartition(":")   # options may hold colons (tokens=21:41), keys do not
        probe, options = _probe_call(where, call, probe_function)
        if not registry.metric_known(probe, key):   # before any run is probed
            raise ProbeError(f"{where}: probe {probe} has no metric '{key}'"
                             f"{did_you_mean(key.split('[', 1)[0], registry.get(probe).metrics)} (its metrics: "
                             f"{', '.join(registry.get(probe).metrics)})")
        if call not in cache:
            _check_default_tokens(where, probe, key, options, file, run)
            cache[call] = probe_function(probe)(file, step=int(run.steps[index]), **options)[0].summary()
        if key not in cache[call]:
            raise ProbeError(f"{where}: probe {probe} reports {', '.join(cache[call])}")
        return float(cache[call][key])
    if name == "train_loss":
        return float(run.dataset("train_loss")[index])
    m = re.fullmatch(r"(acc|loss)\[(\w+)\]", name)
    if not m:
        raise ProbeError(f"{where}: use acc[SPLIT], loss[SPLIT], train_loss or PROBE:NAME "
                         "(e.g. similarity:distance_corr)")
    metrics = run.metrics()
    if m.group(2) not in metrics:
        raise ProbeError(f"{where}: no split '{m.group(2)}' in these runs; {os.path.basename(file)} has splits "
                         f"{', '.join(metrics)} (metrics: acc[SPLIT], loss[SPLIT], train_loss, PROBE:NAME)")
    return float(metrics[m.group(2)][m.group(1)][index])


def _check_default_tokens(where: str, probe: str, key: str, options: dict, file: str, run) -> None:
    """A probe called without tokens reads its default group (similarity: reasoning), which runs of
    another task lack (composite runs have anchors and keys): say so in sweep-summary's own grammar,
    the options in brackets, rather than the probe command's --tokens."""
    default = registry.default_tokens(probe)
    if default is None or "tokens" in options or "words" in options:
        return
    groups = sorted(run.groups)
    missing = [g for g in default.split(",") if g not in groups]
    if missing:
        example = f"{probe}(tokens={groups[0] if groups else '11:15'}):{key}"
        raise ProbeError(f"{where}: {probe} reads token group '{missing[0]}' unless told otherwise, and "
                         f"{os.path.basename(file)} has {'groups ' + ', '.join(groups) if groups else 'no groups'}; "
                         f"choose tokens in brackets, e.g. {example}")


_CALL = re.compile(r"^(\w+)(?:\((.*)\))?$")


def _probe_call(where: str, call: str, probe_function) -> tuple[str, dict]:
    """``similarity(tokens=logic,tensor=W_E)`` -> ("similarity", {"tokens": "logic", ...}): a probe
    and its options as the CLI spells them (numbers stay numbers); errors name ``where``, the option
    that holds the call."""
    m = _CALL.match(call.strip())
    probe = m.group(1) if m else call
    known = registry.names("sweeps")
    if not m or probe not in known:
        raise ProbeError(f"{where}: unknown probe '{call}'{did_you_mean(probe, known)} (known: {', '.join(known)};"
                         " options in brackets: similarity(tokens=logic):mean_offdiag)")
    allowed = [p for p in inspect.signature(probe_function(probe)).parameters if p not in ("path", "step")]
    options = {}
    # a comma starts a new option only before NAME=, so token lists (tokens=11,12,13) stay whole
    for item in filter(None, (x.strip() for x in re.split(r",\s*(?=[\w-]+=)", m.group(2) or ""))):
        k, sep, v = item.partition("=")
        k = k.strip().replace("-", "_")
        if not sep or k not in allowed:
            raise ProbeError(f"{where}: '{item}' is not an option of {probe} "
                             f"(options: {', '.join(allowed)})")
        options[k] = _side(v.strip()) if k not in ("tokens", "words") else v.strip()
        if isinstance(options[k], float) and options[k].is_integer():
            options[k] = int(options[k])
    return probe, options


def _side(text: str):
    try:
        return float(text)
    except ValueError:
        return text


def sweep_summary(path: str | os.PathLike, metric=None, outcome=None, *, step: str | int = "latest",
                  probe_function) -> list:
    """:func:`probe.api.sweep_summary`; ``probe_function(name)`` is the API function of probe ``name``
    (given by the API, so that this module does not import it)."""
    from .analyses.uncertainty import CellSummary, describe, proportion

    folder, manifest = read_manifest(path)
    metrics = [metric] if isinstance(metric, str) else list(metric or [])
    outcomes = [outcome] if isinstance(outcome, str) else list(outcome or [])
    parsed = {}
    for o in outcomes:
        m = _OUTCOME.match(o)
        if not m:
            raise ProbeError(f"{param('outcome', o)}: use A>B, A<B, A>=B or A<=B with metrics or numbers")
        parsed[o] = (_side(m.group(1)), m.group(2), _side(m.group(3)))
    cell_keys = [k for k in manifest["grid"] if k not in SEED_FIELDS]
    cells: dict[tuple, dict] = {}
    left_out = []
    for r in manifest["runs"]:
        file = os.path.join(folder, r["path"])
        if r.get("status") == "failed" or not os.path.exists(file):
            left_out.append(r["label"])
            continue
        with Run(file) as run:
            if str(step) == "latest" and int(run.steps[-1]) != int(run.config.get("steps", -1)):
                left_out.append(r["label"])
                continue
            index = run.step_indices(step)[0] if str(step) != "latest" else run.n_snapshots - 1
            kind = run.task.get("kind")
            if not metrics:
                metrics = [f"acc[{s}]" for s in run.splits]
            if not parsed:
                default_of = kind   # the task whose default outcomes these are (the first run's)
                parsed = {o: (_side(a), op, _side(b)) for o in _DEFAULT_OUTCOMES.get(kind, [])
                          for a, op, b in [_OUTCOME.match(o).groups()]}
            # each term with the option that holds it (a term in both: --metric, where it stands alone)
            names = {x: param("outcome", o) if outcomes else
                     f"the default {param('outcome', o)} of {default_of} runs"
                     for o, (a, _, b) in parsed.items() for x in (a, b) if isinstance(x, str)}
            names.update({m: param("metric", m) for m in metrics})
            cache: dict = {}
            values = {n: _run_value(file, run, n, index, cache, probe_function, names[n]) for n in sorted(names)}
            at = int(run.steps[index])
        key = tuple(r["point"].get(k) for k in cell_keys)
        cell = cells.setdefault(key, {"runs": [], "values": [], "steps": set()})
        cell["runs"].append(r["path"])
        cell["values"].append(values)
        cell["steps"].add(at)
    if left_out:
        warnings.warn(f"{len(left_out)} run(s) left out (failed, missing or unfinished): "
                      f"{', '.join(left_out[:5])}{', ...' if len(left_out) > 5 else ''}", ProbeWarning, stacklevel=2)
    if not cells:
        raise ProbeError(f"{path}: no finished run to summarise")

    def holds(values, a, op, b):
        x = values[a] if isinstance(a, str) else a
        y = values[b] if isinstance(b, str) else b
        if not (math.isfinite(x) and math.isfinite(y)):
            return None
        return {">": x > y, "<": x < y, ">=": x >= y, "<=": x <= y}[op]

    return [CellSummary(step=next(iter(c["steps"])) if len(c["steps"]) == 1 else None, cell=dict(zip(cell_keys, key)),
                        runs=c["runs"], stats={m: describe([v[m] for v in c["values"]]) for m in metrics},
                        outcomes={o: proportion([holds(v, *parsed[o]) for v in c["values"]]) for o in parsed})
            for key, c in cells.items()]
