"""Batch analysis: many checkpoints x many probes -> one tidy, step-sorted table.

Rows are ``(path, step, probe, key, metric, value)``; ``key`` names the layer, head or
group a number belongs to. A checkpoint that fails gives one ``error`` row and the batch
goes on. Work runs in-process, in local worker processes (``jobs``) or on an existing
Dask distributed cluster (``scheduler``); each task opens one checkpoint, so memory stays
bounded by one checkpoint per worker.
"""
from __future__ import annotations

import csv
import glob
import io
import json
import math
import os
import signal
import time
from contextlib import closing, nullcontext, suppress
from dataclasses import dataclass
from typing import Callable, Iterable

from . import registry, render
from .files import OutputLock, open_regular, regular_file, writable, write_atomic
from .limits import load_json
from .printable import shown
from .errors import Interrupted, ProbeError, captured, failure, unknown, warn
from .jobs import TIMEOUT_S, ClusterLost, Ended, run
from .params import PARAMS, check_number
from .readers.names import FOLDER_FILES, model_folder, step_from_name
from .signals import stop_asked, stoppable

COLUMNS = ("path", "step", "probe", "key", "metric", "value")
_CHECKPOINT_EXT = (".h5", ".hdf5", ".safetensors", ".pt", ".pth", ".bin", ".ckpt")


def discover(paths: Iterable[str], revisions: str | None = None) -> list[str]:
    """Checkpoints named by files, folders (a model folder, or a folder of checkpoints such as a
    Trainer's ``checkpoint-500/`` folders), globs and hub sources (``hf:ORG/NAME[@REV]``; with
    ``revisions``, a comma list or ``all``, one source per revision)."""
    from .readers.hub import expand, is_hub

    found: list[str] = []
    hub: list[str] = []
    for p in paths:
        if is_hub(p):
            hub += expand(p, revisions)
            continue
        matches = sorted(glob.glob(p)) if any(c in p for c in "*?[") else [p]
        if not matches:
            raise ProbeError(f"no checkpoint matches '{p}'")
        for m in matches:
            if not os.path.exists(m):
                raise ProbeError(f"{m}: no such file or folder")
            if os.path.isdir(m) and not model_folder(m):
                left = {os.path.join(m, name) for name in left_out(m)}   # said, as a run of the folder says them
                for x in sorted(os.path.join(m, x) for x in os.listdir(m) if os.path.join(m, x) not in left):
                    if x.endswith(_CHECKPOINT_EXT) and os.path.exists(x) and not os.path.isdir(x):
                        regular_file(x, "checkpoint file")   # a FIFO or device: refused, not skipped
                        found.append(x)
                    elif model_folder(x):
                        found.append(x)
            else:
                if not os.path.isdir(m):
                    regular_file(m, "checkpoint file")
                found.append(m)
    if revisions and not hub:
        raise ProbeError("--revisions is for hub sources (hf:ORG/NAME)")
    return list(dict.fromkeys([os.path.abspath(f) for f in found] + hub))


def left_out(folder: str) -> list[str]:
    """The names of what ``folder`` holds that its run leaves out though they state a step
    (:func:`probe.readers.names.series`), each said in a warning."""
    from .readers.names import series

    out = []
    for _, name, why in series(folder)[1]:
        warn(f"{folder}: {name} left out of the run: {why}")
        out.append(name)
    return out


@dataclass(frozen=True)
class Task:
    path: str
    probe: str
    options: tuple  # sorted (name, value) pairs


def run_task(task: Task) -> list[tuple]:
    """Rows of one probe on one checkpoint; a failure becomes an ``error`` row, a warning (a zero
    vector, a word left out) a ``warning`` row. The probe gets the options its API function takes
    (:func:`probe.registry.call`)."""
    from . import api
    from .readers.source import Unreadable

    def call():
        return registry.call(api.probe_function(task.probe), task.path, **dict(task.options))

    results, error, notes = captured(call)
    if error is not None and dict(task.options).get("skip_damaged") and isinstance(error, Unreadable):
        step = step_from_name(task.path)   # a checkpoint of the folder that cannot be read: its step left out
        return [(task.path, step, task.probe, "", "warning", f"step {step} left out: {failure(error)}")]
    if error is not None:
        return [(task.path, step_from_name(task.path), task.probe, "", "error", failure(error))]
    step = results[0].step if results else step_from_name(task.path)
    return [(task.path, r.step, task.probe, key, metric, value) for r in results for metric, key, value in r.rows()] \
        + [(task.path, step, task.probe, "", "warning", msg) for msg in notes]


def _sort_key(row):
    step = row[1]
    return (step is None or step == "", int(step) if step not in (None, "") else 0, row[0], row[2], str(row[3]),
            row[4])


def read_table(path: str) -> list[tuple]:
    """The rows of a results table an earlier batch wrote ([] if there is none)."""
    if not os.path.exists(path):
        return []
    try:
        if path.endswith(".json"):
            with open_regular(path, what="results table", encoding="utf-8") as fh:
                return [tuple(r[c] for c in COLUMNS) for r in load_json(fh, path, "results table")]
        with open_regular(path, newline="", what="results table", encoding="utf-8") as fh:
            return [(r["path"], int(r["step"]) if r["step"] not in ("", None) else None, r["probe"], r["key"],
                     r["metric"], r["value"]) for r in csv.DictReader(fh)]
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ProbeError(f"{path}: exists but is not a results table of probe batch ({type(exc).__name__}); "
                         "remove it or choose another output") from None


def input_state(path: str) -> list | None:
    """What a rerun compares to see whether ``path`` changed since its rows were read: the size and
    modification time of the file (of each file of a model folder) and, for a snapshot file, its last
    committed step; None for a hub source (a revision does not change)."""
    from .format import is_snapshot_file, last_step
    from .readers.hub import is_hub

    if is_hub(path):
        return None
    files = sorted(os.path.join(path, f) for f in os.listdir(path)) if os.path.isdir(path) else [path]
    state: list = []
    for f in files:
        with suppress(OSError):
            st = os.stat(f)
            if not os.path.isdir(f):
                state.append([shown(os.path.basename(f)), st.st_size, st.st_mtime_ns])
    if not os.path.isdir(path) and is_snapshot_file(path):
        with suppress(OSError, ProbeError):
            state.append(last_step(path))
    return state


def inputs_file(out: str) -> str:
    """Where a table's record of what its rows were read from lives: beside it, ``OUT.inputs.json``."""
    return out + ".inputs.json"


def read_inputs(out: str) -> dict[tuple[str, str], list | None]:
    """(path, probe) -> :func:`input_state` when its rows were read; {} if there is no record (or it is
    damaged: then every input counts as changed, and is read again)."""
    try:
        with open_regular(inputs_file(out), what="batch record", encoding="utf-8") as fh:
            return {(e["path"], e["probe"]): e["state"] for e in load_json(fh, inputs_file(out), "batch record")}
    except (OSError, ProbeError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return {}


def write_inputs(out: str, record: dict[tuple[str, str], list | None]) -> None:
    entries = [json.dumps({"path": p, "probe": probe, "state": state}) for (p, probe), state in sorted(record.items())]
    write_atomic(inputs_file(out), "[\n" + ",\n".join(entries) + "\n]\n", "batch record")


def _strict(row: tuple) -> tuple:
    """A row as a table file holds it: non-finite numbers as None (JSON null, an empty CSV cell),
    text as valid Unicode (a path that is not UTF-8 with ``\\xNN``: :func:`probe.printable.shown`)."""
    return tuple(None if isinstance(v, float) and not math.isfinite(v) else shown(v) if isinstance(v, str) else v
                 for v in row)


def write_table(path: str, rows: list[tuple]) -> None:
    """Atomically replace ``path`` with the rows, sorted by step (then path, probe, key, metric)."""
    rows = sorted(rows, key=_sort_key)
    fh = io.StringIO()
    if path.endswith(".json"):
        json.dump([dict(zip(COLUMNS, _strict(r))) for r in rows], fh, indent=1, default=str, allow_nan=False)
        fh.write("\n")
    else:
        render.write_csv(COLUMNS, map(_strict, rows), fh)
    write_atomic(path, fh.getvalue(), "results")


def batch(paths: Iterable[str], probes: Iterable[str], options: dict | None = None, out: str | None = None,
          jobs: int = 0, scheduler: str | None = None, progress: Callable[[int, int], None] | None = None,
          revisions: str | None = None, tensorboard: str | None = None,
          scheduler_timeout: float = TIMEOUT_S) -> list[tuple]:
    """Run every probe on every checkpoint; with ``out``, skip what it already holds and rewrite it.
    ``revisions`` (a comma list or ``all``) expands each ``hf:ORG/NAME`` source into its revisions.
    ``tensorboard``: a folder that gets the table's numbers as TensorBoard scalars once the batch is
    done (:func:`write_tensorboard`); the tensorboard package and the folder are checked first.

    ``options`` maps API parameter names to values; each probe gets the ones it takes. A number is
    checked first (:func:`probe.params.check_number`: a ProbeError).
    ``scheduler``: a Dask scheduler's address, reached within ``scheduler_timeout`` seconds (each
    for the connection and its answer).
    ``jobs`` local worker processes; 0 or 1: this process, whose BLAS already uses every core
    (``bench/bench_batch.py``: two single-threaded workers were 0.45x as fast on 4 checkpoints,
    1.00x on 16, on 2 cores).
    """
    options = dict(options or {})
    probes = list(dict.fromkeys(probes))
    for p in probes:
        if p not in registry.names("batch"):
            raise unknown("probe", p, registry.names("batch"))
    for name, value in options.items():   # a bad value once, up front, not as an error row per checkpoint
        if value is not None and name in PARAMS and PARAMS[name].checked:
            check_number(name, value)
    if out and not out.endswith((".csv", ".json")):
        raise ProbeError(f"output {out}: use a .csv or .json name")
    if out:
        writable(out, "results")
    # one batch per table, as one trainer per run file: a second command on the same --out is refused,
    # naming this one, rather than each rewriting the table with its own rows only
    with OutputLock(out) if out else nullcontext():
        return _batch(paths, probes, options, out, jobs, (scheduler, scheduler_timeout), progress, revisions,
                      tensorboard)


def _batch(paths, probes, options, out, jobs, cluster, progress, revisions, tensorboard) -> list[tuple]:
    """:func:`batch` once its output is its own; ``cluster``: (scheduler or None, its timeout)."""
    scheduler = cluster[0]
    if tensorboard is not None:
        from .format import tensorboard as tb

        tb.require()
        tb.prepare(tensorboard)
    checkpoints = discover(paths, revisions)
    if not checkpoints:
        raise ProbeError("no checkpoints found")
    existing = read_table(out) if out else []
    read_from = read_inputs(out) if out else {}
    now = {shown(c): input_state(c) for c in checkpoints} if out else {}   # opens each run: only for a table
    done = {(r[0], r[2]) for r in existing if r[4] != "error"}   # paths as the file spells them: shown()
    # make's rule: rows whose input changed since they were read (or with no record of it) are read again;
    # they stay in the table until their new rows replace them, so a stop loses nothing
    stale = {(c, p) for c, p in done if c in now and p in probes and read_from.get((c, p), "") != now[c]}
    if stale:
        n = len({c for c, _ in stale})
        warn(f"{n} input{'s' * (n > 1)} changed since {'their' if n > 1 else 'its'} rows in {out} were written "
             f"(size, time or last step): {sum(1 for r in existing if (r[0], r[2]) in stale)} rows are read again")
    kept = [r for r in existing if (r[0], r[2]) in done]
    if (jobs > 1 or scheduler) and not options.get("threads"):
        options["threads"] = 1     # a worker per core already: one BLAS thread and one layer at a time each
    opts = tuple(sorted(options.items()))
    tasks = [Task(c, p, opts) for c in checkpoints for p in probes if (shown(c), p) not in done - stale]
    rows: list[tuple] = []
    finished = 0
    saved = {"at": -math.inf, "tasks": 0}

    def table_now() -> list[tuple]:
        fresh = {(shown(r[0]), r[2]) for r in rows}
        return [r for r in kept if (r[0], r[2]) not in fresh] + rows

    def save() -> None:
        try:   # the table first: a row with no record is read again by a rerun, never skipped
            write_table(out, table_now())
        except ProbeError as exc:   # a full disk, a read-only folder, a size limit: the last table stays whole
            if not os.path.exists(out):   # no table: a record of rows it never held is left by no one
                with suppress(OSError):
                    os.unlink(inputs_file(out))
            raise ProbeError(f"{exc}; {out} holds the rows of {saved['tasks']} of {len(tasks)} tasks, as of its "
                             "last save: the same command does the rest once it can write there") from None
        saved["tasks"] = finished
        try:
            write_inputs(out, {**{k: v for k, v in read_from.items() if k in done - stale},
                               **{(shown(r[0]), r[2]): now[shown(r[0])] for r in rows}})
        except ProbeError as exc:   # the table is written: say so, and what a rerun without its record does
            raise ProbeError(f"{exc}; {out} holds the rows of {finished} of {len(tasks)} tasks, without the "
                             "record of what they were read from: the same command reads them again once it "
                             "can write there") from None

    def collect(new_rows):
        nonlocal finished
        rows.extend(new_rows)
        finished += 1
        if progress:
            progress(finished, len(tasks))
        # what finished is on disk every few seconds, so a batch killed outright (SIGKILL, out of
        # memory, power) loses little: the same command then does the rest
        if out and time.monotonic() - saved["at"] >= SAVE_EVERY_S and finished < len(tasks):
            save()
            saved["at"] = time.monotonic()

    stopped, fault = 0, None
    with stoppable():
        try:
            if scheduler:
                _run_dask(tasks, *cluster, collect)
            elif jobs > 1 and len(tasks) > 1:
                _run_pool(tasks, min(jobs, len(tasks)), collect)
            else:
                for t in tasks:
                    if stop_asked():
                        break
                    collect(run_task(t))
            stopped = stop_asked()
        except KeyboardInterrupt:  # a second Ctrl-C, inside a task
            stopped = signal.SIGINT   # KeyboardInterrupt, inside a block: the second Ctrl-C
        except (WorkersLost, ClusterLost) as exc:   # the rows so far are written below first
            fault = exc
    table = sorted(table_now(), key=_sort_key)
    if out:
        save()
    if fault is not None:
        kept_where = f"; their rows are in {out}: the same command does the rest" if out else ""
        raise ProbeError(f"{fault}: {finished} of {len(tasks)} tasks done{kept_where}")
    if tensorboard is not None and not stopped:
        write_tensorboard(tensorboard, table)
    if stopped:
        kept_where = f"; their rows are in {out}: run the same command again to do the rest" if out else ""
        exc = Interrupted(f"Interrupted: {finished} of {len(tasks)} tasks done{kept_where}", signum=stopped)
        exc.rows = table
        raise exc
    return table


SAVE_EVERY_S = 2.0   # how often a running batch rewrites its --out table


def run_names(paths: Iterable[str]) -> dict[str, str]:
    """Path (as the table names it) -> the TensorBoard run its numbers go to, a folder under
    ``--tensorboard``: a snapshot file (.h5) is a run of its own, named by its stem; checkpoints whose
    names state a step (``model_500.pt``, ``checkpoint-500/``, ``hf:ORG/NAME@step500``) are the steps
    of one training, named by their folder (the hub's ``ORG/NAME``); any other checkpoint is a run of
    its own, named without its extension. Runs whose names clash are named by their paths below the
    folder they share (``a/run``, ``b/run``; ``run.h5`` beside a folder ``run/`` keeps its extension)."""
    from .readers.hub import is_hub, parse

    keys = {}   # path -> its run: a file (own run), a folder (of a training's checkpoints) or a hub model
    for p in dict.fromkeys(paths):
        if is_hub(p):
            keys[p] = "hf:" + parse(p)[0]
            continue
        leaf = os.path.normpath(p)
        if os.path.basename(leaf) in FOLDER_FILES:   # checkpoint-500/model.safetensors: the folder's step
            leaf = os.path.dirname(leaf)
        stepped = step_from_name(leaf) is not None and not leaf.endswith((".h5", ".hdf5"))
        keys[p] = os.path.dirname(leaf) if stepped else leaf

    def name(k: str, base: str | None = None, ext: bool = False) -> str:
        if k.startswith("hf:"):
            return k[3:]
        n = os.path.relpath(k, base) if base else os.path.basename(k) or k
        return n if ext or os.path.isdir(k) else os.path.splitext(n)[0]

    names = {k: name(k) for k in set(keys.values())}
    clash: dict[str, list[str]] = {}
    for k, n in names.items():
        clash.setdefault(n, []).append(k)
    for ks in clash.values():
        local = [k for k in ks if not k.startswith("hf:")]
        if len(ks) > 1 and len(local) > 1:
            base = os.path.commonpath(local)
            if base in local:   # a/run beside a/run/... : one level up
                base = os.path.dirname(base)
            below = {k: name(k, base) for k in local}
            same = len(set(below.values())) < len(below)   # run.h5 beside a folder run/: the extension says
            names.update({k: name(k, base, ext=same) for k in local})
    return {p: names[k] for p, k in keys.items()}


def write_tensorboard(folder: str, rows: list[tuple]) -> dict[str, int]:
    """The numbers of a batch table as TensorBoard scalars, ``PROBE/METRIC[KEY]`` at each row's step (a
    checkpoint with no step: 0), in ``folder/RUN`` (:func:`run_names`); error and warning rows and the
    cells of a matrix (the registry's ``matrix``) are left out. A run folder only grows forward
    (:mod:`probe.format.tensorboard`): a second batch adds the steps after those it holds, and says in a
    warning how many points at or before them it left out. Returns run -> points written."""
    from .format import tensorboard as tb

    points: dict[str, dict[int, dict[str, float]]] = {}
    names = run_names(r[0] for r in rows)
    for path, step, probe, key, metric, value in rows:
        if metric in ("error", "warning") or metric == (registry.get(probe).matrix if probe in registry.names() else ""):
            continue
        try:
            value = float(value)   # a table read back from CSV holds text
        except (TypeError, ValueError):
            continue
        step = int(step) if step not in (None, "") else 0
        points.setdefault(names[path], {}).setdefault(step, {})[tb.probe_tag(probe, metric, key)] = value
    written, left_out = {}, 0
    for name, by_step in points.items():
        with tb.Events(os.path.join(folder, name)) as events:
            for step in sorted(by_step):
                events.add(step, by_step[step])
        written[name], left_out = events.written, left_out + events.left_out
    if left_out:
        warn(f"{folder}: {left_out} points before the last step their tag holds there were left out "
             "(TensorBoard takes a step that goes back for a restart); a fresh folder takes them all")
    return written


class WorkersLost(ProbeError):
    """The processes that ran the tasks are gone (a local worker killed, a task that killed its Dask
    workers): said in one line."""


def _run_pool(tasks: list[Task], jobs: int, collect) -> None:
    """Tasks in ``jobs`` spawned worker processes that take one task after another (:func:`probe.jobs.run`,
    ``reuse``: a process per task was slower, ``bench/bench_batch.py --runners``), one BLAS thread each. A
    stop or an error kills them at once (they hold no output); so does the kernel if this process dies."""
    # one BLAS/torch thread per worker: N workers x N threads on N cores thrash
    saved = {k: os.environ.get(k) for k in _THREAD_VARS}
    os.environ.update({k: "1" for k in _THREAD_VARS})
    try:
        with closing(run(_one_thread, tasks, at_once=jobs, reuse=True)) as ends:
            for _, rows, exc in ends:
                if isinstance(exc, Ended):   # the kernel's OOM killer, or any signal, took a worker
                    raise WorkersLost("a worker process died (killed by a signal or for lack of memory; "
                                      "fewer --jobs need less)")
                if exc is not None:
                    raise exc
                collect(rows)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _one_thread(task: Task) -> list[tuple]:
    """:func:`run_task` in a local worker: one torch thread (a worker per core already)."""
    with suppress(ImportError):
        import torch

        torch.set_num_threads(1)
    return run_task(task)


def _run_dask(tasks: list[Task], scheduler: str, timeout: float, collect) -> None:
    with closing(run(run_task, tasks, scheduler=scheduler, timeout=timeout)) as ends:
        for _, rows, exc in ends:
            if exc is not None:   # run_task turns a probe's errors into rows: this is the cluster's
                raise WorkersLost(f"a task failed on the Dask cluster at {scheduler} ({type(exc).__name__}: "
                                  f"{exc})")
            collect(rows)
