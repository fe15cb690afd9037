
import json

import h5py
import numpy as np
import pytest

from probe.errors import ProbeError
from probe.format import P, Run, Writer, read_rows
from probe.format.validate import validate

from waiting import committed, wait_for
from conftest import popen_cli, run_cli


def _make(path, n_steps=3, vocab=50, d=8):
    rng = np.random.default_rng(0)
    params = {"W_E": (vocab, d), "W_pos": (5, d), "blocks.0.attn.W_V": (2, d, 4), "blocks.0.attn.W_O": (2, 4, d),
              "blocks.0.mlp.W_in": (d, 16), "blocks.0.mlp.W_out": (16, d), "b": (d,)}
    w = Writer.create(
        path, config={"gamma": 0.8}, task={"kind": "anchor", "splits": ["mem", "rsn_test"]},
        dims={"vocab": vocab, "d_model": d, "seq": 5, "probe": 3, "layers": 1, "heads": 2, "d_head": 4,
              "d_hidden": d, "d_ff": 16},
        groups={"reasoning": [11, 12, 13]},
        run_arrays={"probe_tokens": np.zeros((3, 5), np.int64), "probe_labels": np.zeros(3, np.int64),
                    "probe_split": np.zeros(3, np.int64), "probe_key_pos": np.zeros(3, np.int64),
                    "label_dist": np.zeros((vocab, vocab)), "label_dist_empirical": np.zeros((vocab, vocab)),
                    "token_freq": np.zeros(vocab)},
        params=params,
        roles={"token_embedding": "W_E", "layer0/W_V": "blocks.0.attn.W_V", "layer0/W_Q": "blocks.0.attn.W_V",
               "layer0/W_K": "blocks.0.attn.W_V", "layer0/W_O": "blocks.0.attn.W_O",
               "position_embedding": "W_pos", "layer0/W_in": "blocks.0.mlp.W_in", "layer0/W_out": "blocks.0.mlp.W_out"},
        attention_shape=(1, 2, 3, 5, 5),
        resume_tensors={"optim/x": ((4,), np.float32)},
    )
    written = []
    for i in range(n_steps):
        vals = {k: rng.standard_normal(s).astype(np.float32) for k, s in params.items()}
        written.append(vals)
        w.append(step=10 * i, epoch=i / 2, time=float(i), train_loss=1.0 / (i + 1), params=vals,
                 metrics={"mem": {"loss": 2.0, "acc": 0.5}, "rsn_test": {"loss": 3.0, "acc": 0.25}},
                 attention=np.full((1, 2, 3, 5, 5), 0.2, np.float32))
        w.save_resume(10 * i, {"optim/x": np.full(4, i, np.float32)})
    return w, written


def test_round_trip_and_hard_links(tmp_path):
    path = tmp_path / "r.h5"
    w, written = _make(path)
    w.close()
    with Run(path) as run:
        assert list(run.steps) == [0, 10, 20]
        assert run.groups["reasoning"].tolist() == [11, 12, 13]
        for i, vals in enumerate(written):
            for k, v in vals.items():
                assert np.array_equal(run.read(k, i), v)
            assert np.array_equal(run.read("token_embedding", i), vals["W_E"])
        # canonical names are hard links, not copies
        f = run.h5
        assert f["snapshots/weights/token_embedding"].id == f["snapshots/params/W_E"].id
        assert run.metrics()["rsn_test"]["acc"].tolist() == [0.25] * 3
        assert run.step_indices("10:21") == [1, 2]
        with pytest.raises(ProbeError, match="no snapshot at step 5"):
            run.step_indices("5")
    assert validate(path) == []
    # superblock version 3: SWMR-capable and readable by HDF5 1.10 tools
    assert path.read_bytes()[8] == 3


HOLDER = """
import sys
from probe.format._h5 import open_h5

f = open_h5(sys.argv[1])   # as every probe command opens a run: HDF5's file lock is held while open
print("open", flush=True)
sys.stdin.read()
f.close()
"""


def test_a_reader_at_the_moment_a_run_file_appears_does_not_stop_its_writer(tmp_path, monkeypatch):
    """A run file appears under its name already open by its SWMR writer. (It used to be renamed into
    place and then opened: a reader that opened it in between, a `probe info` or a report following
    a starting run, held HDF5's file lock and the trainer died "unable to lock file"; CI met it as a
    figures run that never committed a step.) The reader here opens it right after the rename."""
    import os
    import subprocess
    import sys

    path = tmp_path / "r.h5"
    replace, readers = os.replace, []

    def replace_then_read(src, dst):
        replace(src, dst)
        if os.fspath(dst) == str(path) and not readers:
            proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
            readers.append(proc)
            line = proc.stdout.readline()
            assert line == "open\n", proc.communicate()[1]

    monkeypatch.setattr(os, "replace", replace_then_read)
    try:
        w, _ = _make(path, n_steps=2)
        w.close()
    finally:
        for proc in readers:
            proc.communicate(timeout=60)
    assert readers, "the run file was never renamed into place"
    with Run(path) as run:
        assert list(run.steps) == [0, 10]


def test_read_rows_reads_requested_rows_in_order(tmp_path):
    path = tmp_path / "rows.h5"
    data = np.arange(4 * 100 * 3, dtype=np.float32).reshape(4, 100, 3)
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, chunks=(1, 7, 3))
    with h5py.File(path, "r") as f:
        rows = [50, 3, 4, 5, 99, 3]
        assert np.array_equal(read_rows(f["x"], 2, rows), data[2, rows])
        assert np.array_equal(read_rows(f["x"], slice(1, 4), rows), data[1:4][:, rows])


def test_large_tensors_are_chunked_in_row_blocks(tmp_path):
    path = tmp_path / "big.h5"
    w = Writer.create(path, config={}, task={"splits": ["mem"]},
                      dims={"vocab": 5000, "d_model": 128, "seq": 2, "probe": 1, "layers": 0, "heads": 1,
                            "d_head": 1, "d_hidden": 1},
                      groups={"all": [0]}, run_arrays={}, params={"W_E": (5000, 128)},
                      roles={"token_embedding": "W_E"}, attention_shape=None, resume_tensors={})
    w.close()
    with h5py.File(path, "r") as f:
        chunks = f["snapshots/params/W_E"].chunks
    assert chunks[0] == 1 and chunks[1] < 5000 and chunks[1] * 128 * 4 <= 1 << 16


def _chunk_cache_bytes(ds) -> int:
    return ds.id.get_access_plist().get_chunk_cache()[1]


def test_the_writer_holds_no_written_chunk_in_memory(tmp_path):
    """Issue 58, item 8: with HDF5's default chunk cache (8 MiB a dataset in HDF5 2.0) every chunk a
    writer wrote stayed cached, and each flush (every dataset, every snapshot) walked them all: a
    snapshot cost more the more snapshots came before (1-row chunks: 4x after 2,000). The writer's
    datasets cache no chunk, in a new file, a resumed one and a reopened one."""
    path = tmp_path / "r.h5"
    w, _ = _make(path, n_steps=2)
    held = [ds for ds in w._params.values()] + [w._f[P["step"]], w._f[P["attention"]]]
    assert [_chunk_cache_bytes(ds) for ds in held] == [0] * len(held)
    w.close()
    for reopen in (lambda: Writer.resume(path)[0], lambda: Writer.reopen(path)[0]):
        with reopen() as again:
            held = [*again._params.values(), again._f[P["step"]]]
            assert [_chunk_cache_bytes(ds) for ds in held] == [0] * len(held)


def test_unfinished_snapshot_rows_are_invisible(tmp_path):
    path = tmp_path / "u.h5"
    w, _ = _make(path, n_steps=2)
    # a writer killed mid-snapshot leaves rows in some datasets but no new step
    ds = w._f[P["param"].format(name="W_E")]
    ds.resize(3, axis=0)
    ds.flush()
    w.close()
    with Run(path) as run:
        assert run.n_snapshots == 2
    assert validate(path) == []


def test_validate_reports_findings(tmp_path):
    path = tmp_path / "v.h5"
    w, _ = _make(path)
    w.close()
    with h5py.File(path, "a") as f:
        del f["snapshots/metrics/mem/acc"]
        del f["run/probe_batch/labels"]
        f["snapshots/step"][1] = 100  # no longer increasing
    findings = validate(path)
    assert any("snapshots/metrics/mem/acc" in x for x in findings)
    assert any("run/probe_batch/labels" in x for x in findings)
    assert any("strictly increasing" in x for x in findings)
    res = run_cli("probe", "validate", path)
    assert res.returncode == 1
    assert "snapshots/metrics/mem/acc" in res.stdout


def test_probe_reads_a_file_while_the_trainer_writes_it(tmp_path):
    out = tmp_path / "live.h5"
    # far more steps than the test needs: it ends the trainer itself
    proc = popen_cli("probe-train", "--preset", "tiny", "--steps", "1000000", "--snapshot-every", "20",
                     "--out", out, "--quiet", "--threads", "1")
    try:
        wait_for(lambda: committed([out], step=40), "third snapshot", proc)
        sim = run_cli("probe", "similarity", out, "--tokens", "reasoning", "--format", "json")
        assert sim.returncode == 0, sim.stderr
        val = run_cli("probe", "validate", out)
        assert val.returncode == 0, val.stdout + val.stderr
        # a reader that stays open keeps one view (count and steps from one moment) until it refreshes
        with Run(out) as run:
            first, steps = run.n_snapshots, list(run.steps)
            def newer() -> bool:   # a second reader, in a process of its own
                info = run_cli("probe", "info", out, "--format", "json")
                return info.returncode == 0 and json.loads(info.stdout)["steps"][-1] > steps[-1]

            wait_for(newer, "a snapshot seen by a second reader", proc)
            assert run.n_snapshots == first and list(run.steps) == steps
            assert len(run.metrics()["mem"]["loss"]) == first
            wait_for(lambda: run.refresh() > first, "a snapshot seen by the open reader", proc)
            assert list(run.steps[:first]) == steps and len(run.steps) == run.n_snapshots > first
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("remove,finding", [
    ("run/label_dist", "missing dataset 'run/label_dist' (label_dist); needed by theory"),
    ("run/token_groups/memory", "missing dataset 'run/token_groups/memory' (token_group)"),
    ("snapshots/attention", "missing dataset 'snapshots/attention' (attention); needed by attention"),
])
def test_validate_finds_what_a_probe_needs(tiny_run, tmp_path, remove, finding):
    import shutil

    path = tmp_path / "r.h5"
    shutil.copy(tiny_run, path)
    assert validate(path) == []
    with h5py.File(path, "a") as f:
        del f[remove]
    assert any(finding in x for x in validate(path)), validate(path)
    res = run_cli("probe", "validate", path)
    assert res.returncode == 1 and finding in res.stdout


def test_step_spec_takes_a_comma_list(tiny_run):
    from probe.errors import ProbeError
    from probe.format import Run

    with Run(tiny_run) as run:
        steps = [int(s) for s in run.steps]
        got = run.step_indices(f"{steps[3]},latest,{steps[1]},{steps[3]}")
        assert got == [1, 3, len(steps) - 1]            # each once, in step order
        assert run.step_indices(f"0:{steps[2]},latest") == [0, 1, len(steps) - 1]
        with pytest.raises(ProbeError, match="no snapshot at step 7777; steps are " + ", ".join(map(str, steps)) + "$"):
            run.step_indices("0,7777")   # few steps: every one of them
