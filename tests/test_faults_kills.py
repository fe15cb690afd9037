"""Batches and sweeps stopped at random moments (issue 47, point 5): SIGKILL, SIGINT or SIGTERM at a
moment drawn from a seeded generator: for a batch, once its table holds the rows of K inputs (K = 0:
once it has taken its table), for a sweep once its runs have committed step S. Whatever the moment, the
command ends (the signal's exit code, or 0 if it had finished), no process it started outlives it
for long, what it wrote is whole, and the same command then completes the work: every row of the
batch exactly once and equal to an uninterrupted batch, every run of the sweep done and equal, in
every tensor of its last snapshot, to the same run trained without a stop.

Each moment is an event, never a delay: a faster or a busier machine meets the same ones (a batch
that finished first is a moment too: then the signal finds nothing to stop)."""
import csv
import os
import random
import signal

import numpy as np
import pytest

from conftest import end_all, linked_runs, popen_cli, run_cli
from test_signals import descendants, still_running
from waiting import DEADLINE, committed, wait_for

from probe.files import lock_path
from probe.format import Run

pytestmark = pytest.mark.slow

SIGNALS = (signal.SIGKILL, signal.SIGINT, signal.SIGTERM)
N_RUNS = 8


def _moments(n: int, seed: int, most: int) -> list[tuple[signal.Signals, int, str]]:
    """(signal, moment 0..most, jobs) n times."""
    rng = random.Random(seed)
    return [(rng.choice(SIGNALS), rng.randrange(most + 1), rng.choice(["1", "2"])) for _ in range(n)]


def _exit_ok(code: int, sig: signal.Signals) -> bool:
    """The command finished first (0), or ended by the signal: killed (-9), or stopped cleanly (128 + n)."""
    return code in (0, -signal.SIGKILL if sig == signal.SIGKILL else 128 + sig)


def _stopped(proc, sig: signal.Signals, moment: str, reached) -> dict:
    """Send ``sig`` to ``proc`` once ``reached()`` (the moment) or its end, and check how it ended; returns
    the processes it had started then."""
    try:
        wait_for(lambda: proc.poll() is not None or reached(), moment)
        kids = descendants(proc.pid)
        if proc.poll() is None:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=DEADLINE)
    finally:
        end_all(proc)
    assert _exit_ok(proc.returncode, sig), (proc.returncode, err)
    assert "Traceback" not in err
    return kids


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = linked_runs(tmp_path_factory.mktemp("many"), N_RUNS)
    whole = folder / "whole.csv"
    res = run_cli("probe", *_batch(folder, whole, "1"))
    assert res.returncode == 0, res.stderr
    return folder


def _batch(folder, table, jobs: str) -> list:
    return ["batch", *sorted(map(str, folder.glob("run_*.h5"))), "-p", "ood", "-p", "bias", "--step", "all",
            "--jobs", jobs, "-o", table]


def _rows(table) -> list[tuple]:
    if not table.exists():
        return []
    with open(table, newline="") as fh:   # a table on disk is always whole: it parses
        return [tuple(r.values()) for r in csv.DictReader(fh)]


@pytest.mark.parametrize("sig,inputs,jobs", _moments(6, seed=47, most=N_RUNS - 2),
                         ids=lambda v: getattr(v, "name", str(v)))
def test_a_batch_stopped_at_a_random_moment_loses_nothing(runs, tmp_path, sig, inputs, jobs):
    table = tmp_path / "table.csv"
    kids = _stopped(popen_cli("probe", *_batch(runs, table, jobs)), sig, f"the rows of {inputs} inputs on disk",
                    lambda: os.path.exists(lock_path(table)) and len({r[0] for r in _rows(table)}) >= inputs)
    wait_for(lambda: not still_running(kids), "the end of every process the batch started", timeout=60)
    kept = _rows(table)
    assert len(kept) == len(set(kept))
    res = run_cli("probe", *_batch(runs, table, jobs))
    assert res.returncode == 0, res.stderr
    rows = _rows(table)
    assert len(rows) == len(set(rows)) and set(kept) <= set(rows)
    assert sorted(rows) == sorted(_rows(runs / "whole.csv"))


STEPS = 300
SWEEP = ["--preset", "tiny", "--grid", "seed=0,1", "--grid", f"steps={STEPS}", "--grid", "snapshot_every=20",
         "--no-ensemble"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    res = run_cli("probe-train", "sweep", *SWEEP, "--out", out, "--jobs", "2", timeout=DEADLINE)
    assert res.returncode == 0, res.stderr
    return out


@pytest.mark.parametrize("sig,step", [(m[0], m[1] + 1) for m in _moments(4, seed=470, most=STEPS - 2)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_a_sweep_stopped_at_a_random_moment_finishes_every_run_as_if_never_stopped(reference, tmp_path, sig, step):
    out = tmp_path / "sweep"
    kids = _stopped(popen_cli("probe-train", "sweep", *SWEEP, "--out", out, "--jobs", "2"), sig,
                    f"both runs at step {step}",
                    lambda: len(list(out.glob("*.h5"))) == 2 and committed(out.glob("*.h5"), step=step))
    # its trainers stop at a step boundary, killed sweep or not
    wait_for(lambda: not still_running(kids), "the end of every trainer the sweep started")
    res = run_cli("probe-train", "sweep", *SWEEP, "--out", out, "--jobs", "2", timeout=DEADLINE)
    assert res.returncode == 0, res.stderr
    files = sorted(out.glob("*.h5"))
    assert [p.name for p in files] == sorted(p.name for p in reference.glob("*.h5"))
    for path in files:
        with Run(path) as run, Run(reference / path.name) as ref:
            assert np.array_equal(run.steps, ref.steps), path.name
            last = run.n_snapshots - 1
            for name in ref.tensors():
                assert np.array_equal(run.read(name, last), ref.read(name, last)), (path.name, name)
