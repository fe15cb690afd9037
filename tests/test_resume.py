"""A SIGKILL at any moment leaves a valid file; --resume continues it exactly."""
import signal

import numpy as np
import pytest

from probe.errors import ProbeError
from probe.format import Run

from conftest import popen_cli, run_cli
from waiting import importing_torch, wait_for

ARGS = ["--preset", "tiny", "--snapshot-every", "10", "--quiet", "--threads", "1"]


def _snapshots(path) -> int:
    try:
        with Run(path) as run:
            return run.n_snapshots
    except ProbeError:
        return 0


def _kill_when(out, moment, steps=300):
    """SIGKILL the trainer once ``moment(proc)`` has happened (an event, never a time)."""
    proc = popen_cli("probe-train", *ARGS, "--steps", steps, "--out", out)
    try:
        moment(proc)
        assert proc.poll() is None, "the trainer ended before it was killed"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def _snapshotted(out, n):
    return lambda proc: wait_for(lambda: _snapshots(out) >= n, f"snapshot {n}", proc)


MOMENTS = {   # from the program's start to well into training
    "importing-torch": lambda out: lambda proc: wait_for(lambda: importing_torch(proc.pid), "import of torch", proc),
    "file-created": lambda out: lambda proc: wait_for(out.exists, "the file", proc),
    "first-snapshot": lambda out: _snapshotted(out, 1),
    "second-snapshot": lambda out: _snapshotted(out, 2),
    "tenth-snapshot": lambda out: _snapshotted(out, 10),
}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    ref = tmp_path_factory.mktemp("ref") / "ref.h5"
    res = run_cli("probe-train", *ARGS, "--steps", 300, "--out", ref)
    assert res.returncode == 0, res.stderr
    return ref


def test_killed_run_validates_is_readable_and_resumes_exactly(tmp_path, reference):
    out = tmp_path / "killed.h5"
    _kill_when(out, _snapshotted(out, 12))   # near step 80 of 300: most of the run is still to come
    n_killed = _snapshots(out)
    assert 12 <= n_killed
    val = run_cli("probe", "validate", out)
    assert val.returncode == 0, val.stdout + val.stderr
    sim = run_cli("probe", "similarity", out, "--tokens", "reasoning", "--step", "all", "--format", "json")
    assert sim.returncode == 0, sim.stderr

    res = run_cli("probe-train", "--resume", "--out", out, "--quiet")
    assert res.returncode == 0, res.stderr
    assert run_cli("probe", "validate", out).returncode == 0
    with Run(reference) as ref, Run(out) as run:
        assert np.array_equal(run.steps, ref.steps)
        for name in ref.tensors():
            a = ref.tensor(name)[: ref.n_snapshots]
            b = run.tensor(name)[: run.n_snapshots]
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=name)
        for split, ms in ref.metrics().items():
            for metric, v in ms.items():
                np.testing.assert_allclose(run.metrics()[split][metric], v, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(run.h5["snapshots/attention"][: run.n_snapshots],
                                   ref.h5["snapshots/attention"][: ref.n_snapshots], rtol=1e-5, atol=1e-6)
        # time keeps counting across the resume
        assert np.all(np.diff(run.h5["snapshots/time"][: run.n_snapshots]) >= 0)


# tenth-snapshot is slow-marked (CI time): first and second already kill it mid-training
@pytest.mark.parametrize("moment", [pytest.param(m, marks=pytest.mark.slow) if m == "tenth-snapshot" else m
                                    for m in MOMENTS])
def test_kill_at_any_moment_leaves_a_valid_file(tmp_path, moment):
    out = tmp_path / "k.h5"
    _kill_when(out, MOMENTS[moment](out), steps=100_000)   # far more steps than it can finish
    if not out.exists():
        return  # killed before the file was created: nothing half-made at the path
    val = run_cli("probe", "validate", out)
    assert val.returncode == 0, val.stdout + val.stderr
    if _snapshots(out):
        assert run_cli("probe", "info", out).returncode == 0
        with Run(out) as run:
            target = int(run.steps[-1]) + 20
        res = run_cli("probe-train", "--resume", "--out", out, "--quiet", "--steps", target)
        assert res.returncode == 0, res.stderr
        with Run(out) as run:
            assert int(run.steps[-1]) == target


def test_resume_refuses_config_changes(tmp_path, reference):
    import shutil

    out = tmp_path / "r.h5"
    shutil.copy(reference, out)
    res = run_cli("probe-train", "--resume", "--out", out, "--gamma", "0.1")
    assert res.returncode == 2 and "cannot change gamma" in res.stderr
    res = run_cli("probe-train", "--resume", "--out", tmp_path / "none.h5")
    assert res.returncode == 2 and "no such file" in res.stderr


def test_the_cuda_optimizer_path_resumes_exactly(tmp_path, monkeypatch):
    """On CUDA the trainer takes torch's fused AdamW (its fast path there), whose step counts live beside
    the parameters. Forced on the CPU (torch >= 2.4 has it there; no GPU here), a run stopped at a safe
    point resumes to the numbers of the run that never stopped."""
    import torch

    from probe.errors import Interrupted
    from probe.signals import STOP
    from probe_train import Trainer, preset

    adamw = torch.optim.AdamW
    monkeypatch.setattr(torch.optim, "AdamW", lambda *args, **kw: adamw(*args, **{**kw, "fused": True}))
    cfg = preset("tiny", steps=60, snapshot_every=10, snapshot_log=False, threads=1)
    whole = Trainer(cfg, tmp_path / "whole.h5", show_progress=False)
    assert isinstance(whole.opt, adamw) and whole.opt.defaults["fused"]
    whole.run()

    def stop_after_step_30(step):   # what Ctrl-C does: the flag, read at the next safe point
        if step == 30:
            STOP.asked = signal.SIGINT

    with pytest.raises(Interrupted, match="Interrupted at step 30"):
        Trainer(cfg, tmp_path / "cut.h5", show_progress=False, on_snapshot=stop_after_step_30).run()
    Trainer(cfg, tmp_path / "cut.h5", show_progress=False, resume=True).run()
    with Run(tmp_path / "whole.h5") as ref, Run(tmp_path / "cut.h5") as run:
        assert np.array_equal(run.steps, ref.steps)
        for name in ref.tensors():
            np.testing.assert_array_equal(run.tensor(name)[: run.n_snapshots], ref.tensor(name)[: ref.n_snapshots],
                                          err_msg=name)
