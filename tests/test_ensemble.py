"""Seed ensembles (probe_train.ensemble) equal runs trained one by one; --stop-at stops on the full
schedule and resumes to the file an uninterrupted run writes."""
import json

import numpy as np
import pytest

from probe.format import Run

from conftest import run_cli

# 40 steps of each model family; the members differ in seed and gamma
FAMILIES = {
    "gpt": ("tiny", {}),
    "llama": ("llm-tiny", {"steps": 40, "snapshot_every": 10}),
    "emb-mlp": ("emb-mlp-quick", {"n_samples": 8000, "eval_size": 128, "steps": 40, "snapshot_every": 10,
                                  "warmup_steps": 5}),
}
MEMBERS = [(0, 0.3), (1, 0.8), (2, 0.5)]


def _cfgs(name, overrides):
    from probe_train import preset

    return [preset(name, seed=s, gamma=g, threads=1, **overrides) for s, g in MEMBERS]


def _alone(cfgs, folder):
    from probe_train import Trainer

    paths = [folder / f"alone{k}.h5" for k in range(len(cfgs))]
    for cfg, path in zip(cfgs, paths):
        Trainer(cfg, path, show_progress=False).run()
    return paths


def assert_same_run(path, ref, weights_rtol=1e-4, metrics_atol=1e-4):
    """Final weights within ``weights_rtol`` (one norm over every weight together: a parameter with no
    gradient at all, an attention key bias, drifts on float noise under Adam in any two runs), every
    snapshot's metrics to 4 digits, the same snapshot steps."""
    with Run(path) as run, Run(ref) as want:
        assert np.array_equal(run.steps, want.steps)
        diff = norm = 0.0
        for name in want.tensors():
            a, b = want.tensor(name)[-1].astype(np.float64), run.tensor(name)[-1].astype(np.float64)
            diff += ((a - b) ** 2).sum()
            norm += (a ** 2).sum()
        assert np.sqrt(diff / norm) < weights_rtol, np.sqrt(diff / norm)
        for split, ms in want.metrics().items():
            for metric, v in ms.items():
                np.testing.assert_allclose(run.metrics()[split][metric], v, rtol=0, atol=metrics_atol,
                                           err_msg=f"{split} {metric}")


# the LLaMA case (15 s) in the slow set, to keep CI within its time; GPT and Emb-MLP here
@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.slow) if f == "llama" else f for f in FAMILIES])
def test_ensemble_members_equal_runs_trained_alone(tmp_path, family):
    from probe_train.ensemble import Ensemble

    cfgs = _cfgs(*FAMILIES[family])
    alone = _alone(cfgs, tmp_path)
    paths = [tmp_path / f"member{k}.h5" for k in range(len(cfgs))]
    ens = Ensemble(cfgs, paths, show_progress=False)
    first, *others = ens.members   # one copy of the task's device tensors for every member (a GPU's memory)
    assert all(m.tokens is first.tokens and m.eval_idx is first.eval_idx for m in others)
    result = ens.run()
    assert result.failed == {} and [r.path for r in result.results] == [str(p) for p in paths]
    for path, ref in zip(paths, alone):
        assert_same_run(path, ref)
        with Run(path) as run:
            assert run.environment["ensemble"] == 3 and run.environment["precision"] == "fp32"
            assert run.config["seed"] == cfgs[paths.index(path)].seed
    for path in paths:
        assert run_cli("probe", "validate", path).returncode == 0


def test_a_diverging_member_is_failed_and_the_others_go_on(tmp_path):
    import torch

    from probe_train.ensemble import Ensemble

    class Poisoned(Ensemble):
        """Member 1 turns non-finite at step 15, as a diverging run does: NaN in its slice of the weights."""

        def batch(self, step):
            if step == 15:
                with torch.no_grad():
                    self.params["W_E"][1].fill_(float("nan"))
            return super().batch(step)

    cfgs = _cfgs(*FAMILIES["gpt"])
    alone = _alone(cfgs, tmp_path)
    paths = [tmp_path / f"member{k}.h5" for k in range(len(cfgs))]
    result = Poisoned(cfgs, paths, show_progress=False).run()
    assert list(result.failed) == [str(paths[1])]
    assert "diverged: non-finite loss at step 16" in result.failed[str(paths[1])]
    for k in (0, 2):   # untouched by the NaNs beside them
        assert_same_run(paths[k], alone[k])
    with Run(paths[1]) as run:   # the diverged member's file ends at its last finite snapshot, valid
        assert int(run.steps[-1]) == 10
    assert run_cli("probe", "validate", paths[1]).returncode == 0


@pytest.mark.slow   # CI time: test_stop_at_then_resume_writes_the_uninterrupted_file stops and resumes one too
def test_an_ensemble_stopped_early_resumes_alone_or_together(tmp_path):
    """--stop-at on an ensemble: each member's file resumes on its own (probe-train --resume) or with the
    others (an ensemble again), to the run trained without stopping."""
    from probe_train.ensemble import Ensemble

    cfgs = _cfgs(*FAMILIES["gpt"])
    alone = _alone(cfgs, tmp_path)
    paths = [tmp_path / f"member{k}.h5" for k in range(len(cfgs))]
    Ensemble(cfgs, paths, show_progress=False, stop_at=20).run()
    for path in paths:
        with Run(path) as run:
            assert int(run.steps[-1]) == 20 and run.config["steps"] == 40 and run.environment["stop_at"] == 20
    res = run_cli("probe-train", "--resume", "--out", paths[0], "--quiet")
    assert res.returncode == 0, res.stderr
    Ensemble(cfgs[1:], paths[1:], resume=True, show_progress=False).run()
    for path, ref in zip(paths, alone):
        assert_same_run(path, ref)


def test_ensemble_members_must_share_their_shape(tmp_path):
    from probe.errors import ProbeError
    from probe_train import preset
    from probe_train.ensemble import Ensemble

    with pytest.raises(ProbeError, match="differ only in seed and gamma"):
        Ensemble([preset("tiny"), preset("tiny", d_model=32)], [tmp_path / "a.h5", tmp_path / "b.h5"])
    assert not list(tmp_path.iterdir())


# --- --stop-at --------------------------------------------------------------------------------------

ARGS = ["--preset", "tiny", "--steps", "60", "--snapshot-every", "10", "--quiet", "--threads", "1"]


def test_stop_at_then_resume_writes_the_uninterrupted_file(tmp_path):
    whole, cut = tmp_path / "whole.h5", tmp_path / "cut.h5"
    assert run_cli("probe-train", *ARGS, "--out", whole).returncode == 0
    res = run_cli("probe-train", *ARGS, "--stop-at", "30", "--out", cut)
    assert res.returncode == 0, res.stderr
    assert "stopped at step 30 of 60 as asked (--stop-at)" in res.stderr
    with Run(cut) as run:   # the file says both numbers
        assert int(run.steps[-1]) == 30 and run.config["steps"] == 60 and run.environment["stop_at"] == 30
    res = run_cli("probe-train", "--resume", "--out", cut, "--quiet")
    assert res.returncode == 0, res.stderr
    with Run(whole) as ref, Run(cut) as run:
        assert np.array_equal(run.steps, ref.steps)
        for name in ref.tensors():
            np.testing.assert_array_equal(run.tensor(name)[:], ref.tensor(name)[:], err_msg=name)
        for split, ms in ref.metrics().items():
            for metric, v in ms.items():
                np.testing.assert_array_equal(run.metrics()[split][metric], v)
        assert "stop_at" not in run.environment and run.environment["before_resume"]["stop_at"] == 30


def test_stop_at_between_snapshots_adds_one_there(tmp_path):
    out = tmp_path / "r.h5"
    assert run_cli("probe-train", *ARGS, "--stop-at", "25", "--out", out).returncode == 0
    with Run(out) as run:
        assert list(run.steps[-3:]) == [10, 20, 25]
    bad = run_cli("probe-train", *ARGS, "--stop-at", "0", "--out", tmp_path / "x.h5")
    assert bad.returncode == 2 and "--stop-at" in bad.stderr and "Traceback" not in bad.stderr


# --- sweeps --------------------------------------------------------------------------------------------

@pytest.mark.slow   # CI time (the last CI took 1179 s of 1200): 19 s; the members equal runs trained alone in the default set
def test_a_sweep_trains_seed_ensembles_equal_to_runs_one_by_one(tmp_path):
    grid = ["--preset", "tiny", "--grid", "gamma=0.3,0.8", "--grid", "seed=0:2", "--grid", "steps=30"]
    res = run_cli("probe-train", "sweep", *grid, "-o", tmp_path / "ens", "-j", "1", "--ensemble")
    assert res.returncode == 0, res.stderr
    assert ("ensemble of 4: gamma0.3-seed0-steps30, gamma0.3-seed1-steps30, gamma0.8-seed0-steps30, "
            "gamma0.8-seed1-steps30") in res.stderr
    res = run_cli("probe-train", "sweep", *grid, "-o", tmp_path / "one", "-j", "1")   # on a CPU: one by one
    assert res.returncode == 0, res.stderr
    assert "ensemble" not in res.stderr
    ens = json.loads((tmp_path / "ens" / "sweep.json").read_text())["runs"]
    one = json.loads((tmp_path / "one" / "sweep.json").read_text())["runs"]
    assert [r["status"] for r in ens] == ["done"] * 4
    for a, b in zip(ens, one):
        assert a["path"] == b["path"]   # the same configuration, so the same file name
        assert_same_run(tmp_path / "ens" / a["path"], tmp_path / "one" / b["path"])
        with Run(tmp_path / "ens" / a["path"]) as run:
            assert run.environment["ensemble"] == 4


@pytest.mark.slow   # 14 s; --stop-at then resume, equal to the uninterrupted file, stays in CI
def test_a_sweep_stopped_early_is_trained_on_by_the_same_sweep(tmp_path):
    grid = ["--preset", "tiny", "--grid", "seed=0:2", "--grid", "steps=40", "-o", tmp_path, "-j", "1", "--ensemble"]
    res = run_cli("probe-train", "sweep", *grid, "--stop-at", "20")
    assert res.returncode == 0, res.stderr
    assert "0 of 2 runs done, 2 stopped at step 20 or later (--stop-at)" in res.stderr
    res = run_cli("probe-train", "sweep", *grid, "--stop-at", "20")   # nothing left to do
    assert res.returncode == 0 and "training" not in res.stderr
    res = run_cli("probe-train", "sweep", *grid)
    assert res.returncode == 0 and "2 of 2 runs done" in res.stderr, res.stderr
    for r in json.loads((tmp_path / "sweep.json").read_text())["runs"]:
        with Run(tmp_path / r["path"]) as run:
            assert int(run.steps[-1]) == 40 and run.environment["resumed_at"] == 20


@pytest.mark.slow   # CI time
def test_stop_at_with_a_live_report_ends_with_its_last_page(tmp_path):
    """The watcher of --report waits for the run's last step, which a stopped run never reaches: it is asked
    for its last page when the trainer stops, as after Ctrl-C."""
    page = tmp_path / "page.html"
    res = run_cli("probe-train", *ARGS, "--stop-at", "20", "--report", page, "--out", tmp_path / "r.h5")
    assert res.returncode == 0, res.stderr
    assert f"wrote {page}" in res.stderr and "warning" not in res.stderr
    assert "step 20" in page.read_text()
