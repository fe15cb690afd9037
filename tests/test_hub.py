"""Hub checkpoints (hf:ORG/NAME@REV) and Trainer checkpoint folders, offline.

The hub cache is built here in huggingface_hub's own layout (refs/, snapshots/<commit>/,
blobs/<sha256>, snapshot files as relative symlinks into blobs), with three revisions of a
tiny GPT-2 whose token embeddings differ; every CLI call runs with HF_HUB_OFFLINE=1 and
HF_HUB_CACHE pointing there, so nothing can come from the network.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli

REPO = "toy-org/tiny-gpt2"
REVISIONS = {"step1000": 0.1, "step2000": 1.0, "main": 3.0}   # revision -> strength of a shared direction


def _tiny_gpt2(folder: Path, scale: float) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_embd=16, n_layer=2, n_head=4, vocab_size=50, n_positions=8))
    with torch.no_grad():
        model.transformer.wte.weight[:, 0] += 0.02 * scale   # a shared direction: cosines grow with scale
    model.save_pretrained(folder)


def build_cache(root: Path, repo: str = REPO, revisions: dict = REVISIONS) -> Path:
    """A hub cache folder holding ``revisions`` of ``repo``, laid out as huggingface_hub writes it."""
    base = root / ("models--" + repo.replace("/", "--"))
    for name in ("blobs", "refs", "snapshots"):
        (base / name).mkdir(parents=True, exist_ok=True)
    for i, (rev, scale) in enumerate(revisions.items()):
        work = root / f"work-{i}"
        _tiny_gpt2(work, scale)
        commit = hashlib.sha1(f"{repo}@{rev}".encode()).hexdigest()
        snap = base / "snapshots" / commit
        snap.mkdir(parents=True)
        for f in sorted(work.iterdir()):
            data = f.read_bytes()
            sha = hashlib.sha256(data).hexdigest()
            (base / "blobs" / sha).write_bytes(data)
            (snap / f.name).symlink_to(os.path.join("..", "..", "blobs", sha))
        (base / "refs" / rev).write_text(commit)
        shutil.rmtree(work)
    return root


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory) -> Path:
    return build_cache(tmp_path_factory.mktemp("hub"))


def _env(cache: Path) -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HOME": str(cache.parent / "home")}


def test_batch_over_revisions_offline(hub_cache):
    res = run_cli("probe", "batch", f"hf:{REPO}", "--revisions", "all", "-p", "similarity", "--tokens", "0:12",
                  "--format", "csv", env=_env(hub_cache))
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert not [r for r in rows if r["metric"] == "error"], rows[:3]
    mean = {r["path"]: (int(r["step"]), float(r["value"])) for r in rows if r["metric"] == "mean_offdiag"}
    # every revision, named as given, at the step its name states (main states none: last, step 0 by rule)
    assert set(mean) == {f"hf:{REPO}@{r}" for r in REVISIONS}
    assert mean[f"hf:{REPO}@step1000"][0] == 1000 and mean[f"hf:{REPO}@step2000"][0] == 2000
    # the revisions hold different weights: the shared direction grows with the scale
    assert mean[f"hf:{REPO}@step1000"][1] < mean[f"hf:{REPO}@step2000"][1] < mean[f"hf:{REPO}@main"][1]
    # rows are sorted by step
    steps = [int(r["step"]) for r in rows if r["step"]]
    assert steps == sorted(steps)


def test_batch_named_revisions_and_every_probe_takes_hf(hub_cache):
    env = _env(hub_cache)
    res = run_cli("probe", "batch", f"hf:{REPO}", "--revisions", "step2000,step1000", "-p", "spectrum",
                  "--format", "json", env=env)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert {r["path"] for r in got} == {f"hf:{REPO}@step1000", f"hf:{REPO}@step2000"}
    assert [r["step"] for r in got] == sorted(r["step"] for r in got)
    for cmd in (["similarity", "--tokens", "0:8"], ["pca", "--tokens", "0:8"], ["align"], ["condense"],
                ["spectrum"], ["rank"], ["info"]):
        res = run_cli("probe", *cmd, f"hf:{REPO}@step2000", "--format", "json", env=env)
        assert res.returncode == 0, (cmd, res.stderr)
        out = json.loads(res.stdout)
        first = out if cmd[0] == "info" else out["results"][0]
        assert first["step"] == 2000, (cmd, str(out)[:300])
    res = run_cli("probe", "similarity", f"hf:{REPO}", "--tokens", "0:8", "--format", "json", env=env)
    assert res.returncode == 0, res.stderr            # no revision: the main branch
    assert json.loads(res.stdout)["results"][0]["step"] == 0


@pytest.mark.parametrize("args, message", [
    (["similarity", "hf:toy-org/absent@step1"], "not in the hub cache"),
    (["similarity", f"hf:{REPO}@step999"], "not in the hub cache"),
    (["similarity", "hf:bad//name"], "not a hub repository name"),
    (["similarity", f"hf:{REPO}@"], "empty revision"),
    (["batch", "hf:toy-org/absent", "--revisions", "all", "-p", "pca"], "not in the hub cache"),
    (["batch", f"hf:{REPO}@main", "--revisions", "all", "-p", "pca"], "either after '@' or with --revisions"),
])
def test_hub_bad_input_is_one_line(hub_cache, args, message):
    res = run_cli("probe", *args, env=_env(hub_cache))
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and message in lines[0], res.stderr


def test_trainer_checkpoint_folders_sorted_by_step(tmp_path):
    """A Trainer's output folder (checkpoint-500/ ... with config.json and model.safetensors, and one
    step_100 folder holding only weights): batch finds each, reads its step from the name, sorts by step."""
    out = tmp_path / "trainer-out"
    for step, scale in ((1500, 3.0), (500, 0.1), (1000, 1.0)):
        _tiny_gpt2(out / f"checkpoint-{step}", scale)
    _tiny_gpt2(tmp_path / "work", 0.5)
    (out / "step_100").mkdir()
    shutil.copy(tmp_path / "work" / "model.safetensors", out / "step_100" / "model.safetensors")
    shutil.copy(tmp_path / "work" / "config.json", out / "step_100" / "config.json")
    (out / "runs").mkdir()          # a Trainer's logging folder is not a checkpoint
    res = run_cli("probe", "batch", str(out), "-p", "similarity", "--tokens", "0:12", "--format", "csv")
    assert res.returncode == 0, res.stderr
    rows = [r for r in csv.DictReader(io.StringIO(res.stdout)) if r["metric"] == "mean_offdiag"]
    assert [int(r["step"]) for r in rows] == [100, 500, 1000, 1500]
    assert [os.path.basename(r["path"]) for r in rows] == ["step_100", "checkpoint-500", "checkpoint-1000",
                                                           "checkpoint-1500"]
    vals = [float(r["value"]) for r in rows]
    assert vals[1] < vals[2] < vals[3]


def test_revisions_order_and_step_from_name():
    from probe.readers.checkpoints import step_from_name

    assert step_from_name("hf:EleutherAI/pythia-70m@step1000") == 1000
    assert step_from_name("hf:allenai/OLMo-1B@stage1-step1000-tokens4B") == 1000
    assert step_from_name("hf:gpt2") is None and step_from_name("hf:gpt2@main") is None
    assert step_from_name("/x/checkpoint-500/model.safetensors") == 500
    assert step_from_name("/x/phi-2/model.safetensors") is None


def test_revisions_all_lists_cache_refs_in_step_order(hub_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache))
    import importlib

    import huggingface_hub.constants as C

    importlib.reload(C)
    try:
        from probe.readers.hub import expand

        assert expand(f"hf:{REPO}", "all") == [f"hf:{REPO}@step1000", f"hf:{REPO}@step2000", f"hf:{REPO}@main"]
    finally:
        monkeypatch.undo()
        importlib.reload(C)


def test_report_over_hub_revisions_offline(hub_cache, tmp_path):
    page = tmp_path / "hub.html"
    res = run_cli("probe", "report", f"hf:{REPO}", "--revisions", "step1000,step2000", "-o", page,
                  "-p", "similarity", "-p", "spectrum", "--max-steps", "4", env=_env(hub_cache))
    assert res.returncode == 0, res.stderr
    text = page.read_text()
    assert "step 1000" in text and "step 2000" in text and text.index("step 1000") < text.index("step 2000")
    assert "not applicable" not in text
