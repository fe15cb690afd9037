"""Malformed snapshot files (issue 23, items 6 and 7): a file that ``probe validate`` flags is refused by
the commands that would read what is wrong with it, with validate's own words on one ``Error:`` line
(exit 2, nothing on stdout), and validate lists it. Links and storage that lead out of the file are
never followed: an external link (to a FIFO, which would block, or to another file), a soft link that
dangles or leaves the file, a dataset stored in another file, a virtual dataset mapping other files.

Each file is a copy of the conftest ``tiny_run`` edited with h5py. The FIFO cases run one process each
with a deadline (a hang fails the test instead of hanging the suite); the others run forked, two at a
time (``forkcli.ForkCLI``). No input file changes (a hash of every regular file before and after)."""
import hashlib
import json
import os
import shutil
import subprocess

import h5py
import numpy as np
import pytest

from broken import digest
from conftest import run_cli
from forkcli import ForkCLI

EMB, W_E, STEP = "snapshots/weights/token_embedding", "snapshots/params/W_E", "snapshots/step"
# a deadline for a call that might block on a FIFO: far above any refusal (well under a second idle)
FIFO_DEADLINE = 60

# Every command that reads a snapshot file, as the CLI takes it ({f}: the file, {d}: the work folder).
ALL = {
    "info": ["info", "{f}"], "similarity": ["similarity", "{f}"], "pca": ["pca", "{f}"], "align": ["align", "{f}"],
    "condense": ["condense", "{f}"], "theory": ["theory", "{f}"], "ood": ["ood", "{f}"],
    "attention": ["attention", "{f}"], "bias": ["bias", "{f}"], "spectrum": ["spectrum", "{f}"],
    "norms": ["norms", "{f}"], "sinks": ["sinks", "{f}"], "rank": ["rank", "{f}"], "dynamics": ["dynamics", "{f}"],
    "tokens": ["tokens", "{f}", "--step-b", "10"], "report": ["report", "{f}", "-o", "{d}/out.html"],
}
SOME = ["info", "similarity", "ood", "bias", "attention", "spectrum", "report"]

# (file, fragment of the error line, commands that must refuse it). Faults found at open (links, the
# dims attribute, the steps) stop every command; a malformed dataset stops the commands that read it.
FILES = [
    ("steps-repeat.h5", "'snapshots/step' is not strictly increasing (snapshot 3 has step", list(ALL)),
    ("steps-back.h5", "'snapshots/step' is not strictly increasing", SOME),
    ("step-2d.h5", "'snapshots/step' has shape (9, 1), expected ('n',)", SOME),
    ("step-float.h5", "'snapshots/step' has dtype float64, expected int64", SOME),
    ("dims-novocab.h5", "dims attribute lacks integer 'vocab'", list(ALL)),
    ("dims-list.h5", "root attribute 'dims' is not a JSON object", SOME),
    ("extlink-other.h5", "'run/token_groups/reasoning' is an external link to '/ids' in other.h5", list(ALL)),
    ("soft-dangling.h5", f"'{EMB}' is a soft link to '/nowhere/token_embedding', which does not exist", SOME),
    ("soft-out.h5", "'outside' is an external link to '/' in other.h5", SOME),
    ("soft-loop.h5", "is part of a loop of more than 16 soft links", SOME),
    ("emb-1d.h5", f"'{EMB}' has shape (9,), expected ('n', 'vocab', 'd_model')",
     ["info", "similarity", "pca", "align", "condense", "theory", "ood", "spectrum", "rank", "report"]),
    ("emb-short.h5", "has 7 snapshots, fewer than the 9 committed steps",
     ["info", "similarity", "pca", "align", "ood", "spectrum", "rank", "report"]),
    ("dims-dmodel.h5", "expected d_model=17", ["info", "similarity", "pca", "theory", "ood", "norms", "rank", "report"]),
    ("metric-short.h5", "'snapshots/metrics/mem/loss' has 3 snapshots, fewer than the 9 committed steps",
     ["info", "bias", "report"]),
    ("attention-rank.h5", "'snapshots/attention' has shape (9, 2, 12, 9, 9), expected", ["attention", "sinks", "report"]),
    ("group-2d.h5", "'run/token_groups/reasoning' has shape (2, 5), expected ('k',)",
     ["info", "similarity", "pca", "theory", "align", "report"]),
    ("group-ids.h5", "token group 'reasoning' has ids outside 0..", ["info", "similarity", "pca", "theory", "report"]),
    ("extstore-other.h5", "stores its data in another file (", ["info", "similarity", "ood", "spectrum", "report"]),
    ("vds-other.h5", "is a virtual dataset with data in other files (other.h5)",
     ["info", "similarity", "ood", "spectrum", "report"]),
]
# Files whose reading would block on the FIFO "fifo" beside them: every command must refuse them at once.
FIFO_FILES = [
    ("extlink-fifo.h5", f"'{EMB}' is an external link to '/x' in fifo"),
    ("extlink-root-fifo.h5", "'extra' is an external link to '/x' in "),
    ("extstore-fifo.h5", "'snapshots/step' stores its data in another file (fifo)"),
    ("vds-fifo.h5", "'snapshots/step' is a virtual dataset with data in other files (fifo)"),
]
# What validate lists for each file (several findings where one fault makes more than one).
LISTED = {name: frag for name, frag, _ in FILES} | dict(FIFO_FILES) | {
    "soft-out.h5": f"'{EMB}' is a soft link to '/outside/x', which leaves the file through the link 'outside'",
    "emb-short.h5": f"'{EMB}' has 7 snapshots, fewer than the 9 committed steps",
    "dims-dmodel.h5": f"'{EMB}' axis 2 is 16, expected d_model=17",
}


def _replace_embedding(f, **kw):
    """The token embedding (a parameter and its canonical hard link) replaced by a new dataset."""
    del f[EMB], f[W_E]
    f.create_dataset(W_E, **kw)
    f[EMB] = f[W_E]


def _virtual(f, path: str, source: str, unlimited: bool):
    """``path`` replaced by a virtual dataset mapping dataset x of file ``source``; ``unlimited``: a
    mapping whose extent is known only from the source (reading the extent opens ``source``)."""
    old = f[path]
    shape, dtype = old.shape, old.dtype
    del f[path]
    if unlimited:
        from h5py import h5d, h5p, h5s, h5t

        vspace = h5s.create_simple(shape, (h5s.UNLIMITED,))
        vspace.select_hyperslab((0,), (1,), stride=(1,), block=(h5s.UNLIMITED,))
        sspace = h5s.create_simple(shape, (h5s.UNLIMITED,))
        sspace.select_hyperslab((0,), (1,), stride=(1,), block=(h5s.UNLIMITED,))
        dcpl = h5p.create(h5p.DATASET_CREATE)
        dcpl.set_virtual(vspace, source.encode(), b"x", sspace)
        parent, name = path.rsplit("/", 1)
        h5d.create(f[parent].id, name.encode(), h5t.py_create(dtype), h5s.create_simple(shape, (h5s.UNLIMITED,)),
                   dcpl=dcpl)
    else:
        layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
        layout[0, 0, :10] = h5py.VirtualSource(source, "x", shape=(10,))
        f.create_virtual_dataset(path, layout, fillvalue=0)


def _dims(**change):
    def edit(f):
        dims = json.loads(f.attrs["dims"])
        dims.update({k: v for k, v in change.items() if v is not None})
        for k in [k for k, v in change.items() if v is None]:
            del dims[k]
        f.attrs["dims"] = json.dumps(dims)
    return edit


def _step_values(change):
    def edit(f):
        v = f[STEP][...]
        change(v)
        f[STEP][...] = v
    return edit


def _step_replaced(make):
    return _dataset_replaced(STEP, make)


def _dataset_replaced(path, make):
    """``path`` replaced by ``make`` of its values, with a checksum as the writer gives it (schema 1.4):
    the fault is the one ``make`` makes."""
    def edit(f):
        v = f[path][...]
        del f[path]
        f.create_dataset(path, data=make(v), fletcher32=True)
    return edit


def _embedding_swapped(**kw):
    def edit(f):
        shape = f[W_E].shape
        _replace_embedding(f, **{k: (v(shape) if callable(v) else v) for k, v in kw.items()})
    return edit


def _links(**links):
    def edit(f):
        for path, link in links.items():
            if path in f:
                del f[path]
            f[path] = link
    return edit


def _step_stored_in(filename):
    def edit(f):
        n = f[STEP].shape[0]
        del f[STEP]
        f.create_dataset(STEP, shape=(n,), dtype="i8", external=[(filename, 0, 8 * n)])
    return edit


def _embedding_mapped_from(filename):
    def edit(f):
        del f[EMB]
        _virtual(f, W_E, filename, unlimited=False)
        f[EMB] = f[W_E]
    return edit


def _edits(d):
    fifo, raw = str(d / "fifo"), str(d / "raw.bin")
    return {
        "steps-repeat.h5": _step_values(lambda v: v.__setitem__(3, v[2])),         # a step twice
        "steps-back.h5": _step_values(lambda v: v.__setitem__([2, 3], v[[3, 2]])),  # two swapped
        "step-2d.h5": _step_replaced(lambda v: v[:, None]),
        "step-float.h5": _step_replaced(lambda v: v.astype(np.float64)),
        "dims-novocab.h5": _dims(vocab=None),
        "dims-list.h5": lambda f: f.attrs.__setitem__("dims", "[1, 2]"),
        "dims-dmodel.h5": _dims(d_model=17),
        "emb-1d.h5": lambda f: _replace_embedding(f, data=np.zeros(f[STEP].shape[0], np.float32)),
        "emb-short.h5": lambda f: f[W_E].resize(f[STEP].shape[0] - 2, axis=0),
        "metric-short.h5": lambda f: f["snapshots/metrics/mem/loss"].resize(3, axis=0),
        "attention-rank.h5": _dataset_replaced("snapshots/attention", lambda v: v[:, 0]),
        "group-2d.h5": _dataset_replaced("run/token_groups/reasoning", lambda v: v.reshape(2, -1)),
        "group-ids.h5": _dataset_replaced("run/token_groups/reasoning", lambda v: v + 1000),
        "extlink-other.h5": _links(**{"run/token_groups/reasoning": h5py.ExternalLink("other.h5", "/ids")}),
        "extlink-fifo.h5": _links(**{EMB: h5py.ExternalLink("fifo", "/x")}),
        "extlink-root-fifo.h5": _links(extra=h5py.ExternalLink(fifo, "/x")),
        "soft-dangling.h5": _links(**{EMB: h5py.SoftLink("/nowhere/token_embedding")}),
        "soft-out.h5": _links(outside=h5py.ExternalLink("other.h5", "/"), **{EMB: h5py.SoftLink("/outside/x")}),
        "soft-loop.h5": _links(**{"run/a": h5py.SoftLink("/run/b"), "run/b": h5py.SoftLink("a")}),
        "soft-inside.h5": _links(**{"run/alias": h5py.SoftLink("/snapshots/step")}),
        "extstore-fifo.h5": _step_stored_in("fifo"),
        "extstore-other.h5": _embedding_swapped(shape=lambda s: s, dtype="f4",
                                                external=lambda s: [(raw, 0, 4 * int(np.prod(s)))]),
        "vds-fifo.h5": lambda f: _virtual(f, STEP, "fifo", unlimited=True),
        "vds-other.h5": _embedding_mapped_from("other.h5"),
    }


@pytest.fixture(scope="module")
def bad(tmp_path_factory, tiny_run):
    d = tmp_path_factory.mktemp("bad-format")
    os.mkfifo(d / "fifo")
    os.mkfifo(d / "fifo.h5")                         # a FIFO given as the snapshot file itself
    with h5py.File(d / "other.h5", "w") as g:        # another HDF5 file a link could lead to
        g["x"] = np.arange(10.0)
        g["ids"] = np.arange(11, 21)
    np.zeros(1 << 16, dtype=np.float32).tofile(d / "raw.bin")
    shutil.copy(tiny_run, d / "good.h5")
    with h5py.File(d / "good.h5") as f:              # the numbers in the fragments are the tiny run's
        assert f[STEP].shape == (9,) and f[EMB].shape[2] == 16 and f["snapshots/attention"].ndim == 6
    for name, edit in _edits(d).items():
        shutil.copy(tiny_run, d / name)
        with h5py.File(d / name, "a") as f:
            edit(f)
    return d


def _argv(cmd: str, name: str, d) -> list[str]:
    return ["probe", *[a.format(f=d / name, d=d) for a in ALL[cmd]]]


CASES = [(name, cmd, frag) for name, frag, cmds in FILES for cmd in cmds]


@pytest.fixture(scope="module")
def results(bad):
    """Every non-FIFO case run once (two at a time), with the folder's digest before and after."""
    before = digest(bad)
    with ForkCLI(jobs=2) as cli:
        outs = cli.run_many([_argv(cmd, name, bad) for name, cmd, _ in CASES])
    return outs, before


def _assert_refused(res, frag, argv):
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, (argv, res.returncode, res.stdout[-300:], res.stderr[-500:])
    assert len(lines) == 1 and lines[0].startswith("Error: "), (argv, res.stderr)
    assert not lines[0].startswith("Error: unexpected "), (argv, lines[0])
    assert res.stdout == "", (argv, res.stdout[:300])          # no number before the error
    assert frag in lines[0], (argv, lines[0])


def test_the_cases_are_many():
    assert len(CASES) + len(FIFO_FILES) * len(SOME) + len(LISTED) >= 150


@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{n}-{c}" for n, c, _ in CASES])
def test_a_malformed_file_is_refused_in_validates_words(results, bad, i):
    name, cmd, frag = CASES[i]
    _assert_refused(results[0][i], frag, _argv(cmd, name, bad))


@pytest.mark.parametrize("name,frag", FIFO_FILES, ids=[n for n, _ in FIFO_FILES])
@pytest.mark.parametrize("cmd", SOME + ["validate"])
def test_a_link_or_storage_to_a_fifo_is_refused_at_once(bad, name, frag, cmd):
    """Reading the FIFO would block forever: the deadline turns a hang into a failure, and the refusal
    must come well before it."""
    argv = ["probe", "validate", str(bad / name)] if cmd == "validate" else _argv(cmd, name, bad)
    try:
        res = run_cli(*argv, timeout=FIFO_DEADLINE)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(argv)} blocked on the FIFO")
    if cmd == "validate":
        assert res.returncode == 1 and frag in res.stdout, (res.returncode, res.stdout, res.stderr)
    else:
        _assert_refused(res, frag, argv)


@pytest.mark.parametrize("name", sorted(LISTED))
def test_validate_lists_the_fault(bad, name):
    res = run_cli("probe", "validate", bad / name, "--format", "json", timeout=FIFO_DEADLINE)
    assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
    findings = json.loads(res.stdout)["findings"]
    assert any(LISTED[name] in x for x in findings), findings


def test_validate_prints_the_findings_and_exits_1(bad):
    for name in ("steps-repeat.h5", "soft-out.h5", "extstore-fifo.h5", "group-ids.h5"):
        res = run_cli("probe", "validate", bad / name, timeout=FIFO_DEADLINE)
        assert res.returncode == 1 and LISTED[name] in res.stdout, (name, res.stdout, res.stderr)
        assert res.stderr == ""


def _refusal_within(deadline: float, fn, *args) -> str:
    """The ProbeError text of ``fn(*args)`` in this process, from a daemon thread: a call that blocks
    on a FIFO fails the test at the deadline instead of hanging the suite."""
    import threading

    from probe.errors import ProbeError

    out = {}

    def call():
        try:
            fn(*args)
            out["error"] = None
        except ProbeError as exc:
            out["error"] = str(exc)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(deadline)
    assert "error" in out, f"{fn.__name__}{args} blocked"
    assert out["error"] is not None, f"{fn.__name__}{args} was not refused"
    return out["error"]


def test_a_fifo_as_the_snapshot_file_is_refused_before_it_is_opened(bad):
    from probe.format import Run

    res = run_cli("probe", "validate", bad / "fifo.h5", timeout=FIFO_DEADLINE)
    _assert_refused(res, "snapshot file is a FIFO (named pipe), not a regular file", ["validate", "fifo.h5"])
    assert "is a FIFO" in _refusal_within(FIFO_DEADLINE, Run, bad / "fifo.h5")


def test_the_python_api_raises_the_same_refusal(bad):
    import probe
    from probe.format import Run

    for name, frag in [("steps-repeat.h5", "not strictly increasing"), ("extlink-fifo.h5", "external link"),
                       ("vds-fifo.h5", "virtual dataset"), ("extstore-fifo.h5", "stores its data in another file")]:
        msg = _refusal_within(FIFO_DEADLINE, Run, bad / name)
        assert msg.startswith(f"{bad / name}: ") and frag in msg, msg
    assert "has shape (9,)" in _refusal_within(FIFO_DEADLINE, probe.similarity, bad / "emb-1d.h5")
    assert "fewer than the 9 committed steps" in _refusal_within(FIFO_DEADLINE, probe.bias, bad / "metric-short.h5")


def test_batch_reports_the_refusal_as_the_rows_error(bad):
    """batch keeps going past a bad file: its row holds the error, and no number."""
    res = run_cli("probe", "batch", bad / "steps-repeat.h5", bad / "emb-1d.h5", "--probe", "similarity",
                  "--format", "csv", timeout=120)
    rows = res.stdout.strip().splitlines()[1:]
    assert len(rows) == 2 and all(",error," in r for r in rows), res.stdout
    assert "not strictly increasing" in rows[0] + rows[1] and "has shape (9,)" in rows[0] + rows[1]


def test_a_soft_link_inside_the_file_is_fine(bad):
    res = run_cli("probe", "similarity", bad / "soft-inside.h5", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert run_cli("probe", "validate", bad / "soft-inside.h5").returncode == 0


def test_a_resume_refuses_what_the_readers_leave_to_it(bad, tmp_path):
    """The resume slots are read by a resume only; their links and storage are checked there."""
    path = tmp_path / "r.h5"
    shutil.copy(bad / "good.h5", path)
    with h5py.File(path, "a") as f:
        slot = "resume/slot0/optim/W_E/exp_avg"
        f[slot + "_x"] = h5py.ExternalLink(str(bad / "fifo"), "/x")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    assert run_cli("probe", "info", path).returncode == 0          # a reader never goes there
    res = run_cli("probe", "validate", path, timeout=FIFO_DEADLINE)  # validate looks everywhere
    assert res.returncode == 1 and "exp_avg_x' is an external link to '/x' in" in res.stdout, res.stdout
    res = run_cli("probe-train", "--resume", "--out", path, "--steps", "60", timeout=FIFO_DEADLINE)
    _assert_refused(res, "exp_avg_x' is an external link to '/x' in", ["probe-train --resume"])
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_nothing_was_written_or_changed(bad, results):
    _, before = results
    assert digest(bad) == before
    assert not (bad / "out.html").exists()
