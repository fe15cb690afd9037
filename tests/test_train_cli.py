import json
import platform

import h5py
import pytest
import torch

from probe_train.config import preset
from probe_train.models import build_model
from probe_train.trainer import lr_at, snapshot_steps

from conftest import run_cli


def test_emb_mlp_run_writes_a_valid_file_without_attention(tmp_path):
    out = tmp_path / "emb.h5"
    res = run_cli("probe-train", "--preset", "tiny", "--model", "emb-mlp", "--gamma", "0.8", "--out", out,
                  "--quiet", "--threads", "1")
    assert res.returncode == 0, res.stderr
    assert run_cli("probe", "validate", out).returncode == 0
    with h5py.File(out, "r", swmr=True) as f:
        assert "snapshots/attention" not in f
        assert f["snapshots/weights/token_embedding"].id == f["snapshots/params/W_E"].id
        assert json.loads(f.attrs["config"])["model"] == "emb-mlp"
    sim = run_cli("probe", "similarity", out, "--tokens", "keys", "--format", "json")
    assert sim.returncode == 0, sim.stderr


def test_flags_override_the_preset(tmp_path):
    out = tmp_path / "o.h5"
    res = run_cli("probe-train", "--preset", "tiny", "--gamma", "0.3", "--d-model", "24", "--steps", "12",
                  "--snapshot-every", "6", "--no-snapshot-log", "--norm", "post",
                  "--no-bias", "--out", out, "--quiet")
    assert res.returncode == 0, res.stderr
    info = json.loads(run_cli("probe", "info", out, "--format", "json").stdout)
    c = info["config"]
    assert (c["gamma"], c["d_model"], c["steps"], c["norm"], c["bias"]) == (0.3, 24, 12, "post", False)
    assert info["steps"] == [0, 6, 12]
    assert info["tensors"]["token_embedding"] == [201, 24]
    assert "blocks.0.attn.b_Q" not in info["tensors"]
    # final metrics go to stdout, one line per split
    assert [ln.split("\t")[0] for ln in res.stdout.strip().splitlines()] == ["mem", "rsn_train", "rsn_test"]


def test_python_m_train_help_lists_every_config_flag():
    res = run_cli("probe-train", "--help")
    assert res.returncode == 0
    for flag in ("--gamma", "--key-min", "--held-out", "--snapshot-every", "--weight-decay", "--resume"):
        assert flag in res.stdout


def test_paper1_preset_is_the_paper_task_with_paper2_model_sizes():
    cfg = preset("paper1", gamma=0.8)
    assert (cfg.key_min, cfg.key_max, cfg.n_samples, cfg.seq_len, cfg.vocab_size) == (21, 120, 200_000, 9, 201)
    assert (cfg.d_model, cfg.d_ff, cfg.head_dim, cfg.heads, cfg.norm, cfg.bias) == (400, 1200, 200, 1, "post", False)
    m = build_model(cfg)
    assert m.blocks[0].attn.W_V.shape == (1, 400, 200)
    logits = m(torch.randint(21, 121, (2, 9)))
    assert logits.shape == (2, 201)


def test_schedules():
    cfg = preset("tiny", steps=100, snapshot_every=30)
    assert snapshot_steps(cfg) == [0, 1, 2, 4, 8, 16, 30, 60, 90, 100]
    cfg = preset("tiny", steps=1000, warmup_steps=10, lr=1.0, min_lr_ratio=0.1)
    assert lr_at(cfg, 0) == 0.1 and lr_at(cfg, 9) == 1.0
    assert abs(lr_at(cfg, 1000) - 0.1) < 1e-9 and lr_at(cfg, 500) < lr_at(cfg, 100)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="flush-to-zero is an x86 mode")
def test_cpu_trainer_flushes_subnormals(tmp_path):
    """Small init puts gradients and Adam moments below 1.2e-38; x86 is many times slower there."""
    from probe_train import Trainer

    torch.set_flush_denormal(False)
    assert (torch.tensor([1e-39]) * 1.0).item() != 0.0
    Trainer(preset("tiny", gamma=1.0, steps=2), tmp_path / "r.h5", show_progress=False, snapshots=False)
    assert (torch.tensor([1e-39]) * 1.0).item() == 0.0


def test_threads_are_pinned_and_recorded(tmp_path):
    """The default (--threads 0) is one thread on a CPU, whatever the machine: the same numbers as an
    explicit --threads 1; the file records the threads and library versions it was trained with."""
    import numpy as np

    import probe

    paths = {}
    for t in ("0", "1", "2"):
        paths[t] = tmp_path / f"t{t}.h5"
        res = run_cli("probe-train", "--preset", "tiny", "--threads", t, "--quiet", "--out", paths[t])
        assert res.returncode == 0, res.stderr
    env = {t: probe.info(p)["environment"] for t, p in paths.items()}
    assert (env["0"]["threads"], env["1"]["threads"], env["2"]["threads"]) == (1, 1, 2)
    assert env["0"]["torch"].startswith("2.") and env["0"]["device"] == "cpu" and "numpy" in env["0"]
    with probe.Run(paths["0"]) as a, probe.Run(paths["1"]) as b:
        for name in a.tensors():
            np.testing.assert_array_equal(a.tensor(name)[:], b.tensor(name)[:], err_msg=name)
    assert "1 torch thread(s)" in run_cli("probe", "info", paths["0"]).stdout


def test_composite_paper_schedule_is_the_authors_step_by_step():
    """Paper 2's code: linear warm-up from 1e-5 to 2e-4 over 10 epochs of 370 batches, then a cosine
    down to 1e-5 over 200 epochs (210 epochs = 77,700 steps), 759,375 training sequences."""
    import math

    from probe_train.tasks import make_task

    cfg = preset("composite-paper")
    assert (cfg.steps, cfg.batch_size, cfg.warmup_steps) == (77_700, 2048, 3_700)
    assert (cfg.head_bias, cfg.norm_bias, cfg.decay, cfg.bias) == (True, True, "all", False)
    for step in range(0, 3_700, 37):                                   # warm-up, stepped per batch
        assert lr_at(cfg, step) == pytest.approx(1e-5 + (2e-4 - 1e-5) * step / 3_700, rel=1e-12)
    for epoch in range(0, 201, 5):                                     # then the cosine, 200 epochs
        step = 3_700 + 370 * epoch
        want = 1e-5 + 0.5 * (2e-4 - 1e-5) * (1 + math.cos(math.pi * epoch / 200))
        assert lr_at(cfg, min(step, 77_699)) == pytest.approx(want, rel=1e-3, abs=1e-9)
    assert lr_at(cfg, 3_700) == pytest.approx(2e-4) and lr_at(cfg, 77_700) == pytest.approx(1e-5)
    small = preset("composite-paper", n_samples=759_375 // 50, steps=10)   # the per-pair count scales
    task = make_task(small)
    assert len(task.train_indices) == 15 * (759_375 // 50 // 15)
    assert 759_375 // 15 == 50_625 and 759_375 // 2048 == 370


def test_authors_switches_change_what_they_say(tmp_path):
    import torch

    cfg = preset("tiny", bias=False, head_bias=True, norm_bias=True, decay="all", steps=2, weight_decay=0.1)
    model = build_model(cfg, torch.Generator().manual_seed(0))
    names = dict(model.named_parameters())
    assert "b_U" in names and "blocks.0.ln1.bias" in names and "blocks.0.attn.b_Q" not in names
    assert 0 < names["b_U"].abs().max() <= 1 / cfg.d_model ** 0.5            # PyTorch's default, not gamma
    from probe_train.trainer import Trainer

    t = Trainer(cfg, tmp_path / "a.h5", show_progress=False, snapshots=False)
    decayed = [g for g in t.opt.param_groups if g["weight_decay"] > 0][0]["params"]
    assert len(decayed) == len(list(model.parameters()))                     # decay on every parameter
    t = Trainer(preset("tiny", steps=2, weight_decay=0.1), tmp_path / "b.h5", show_progress=False, snapshots=False)
    assert all(p.ndim >= 2 for g in t.opt.param_groups if g["weight_decay"] > 0 for p in g["params"])


def test_out_naming_a_folder_is_one_line_that_says_to_name_a_file(tmp_path):
    """Before: 'exists; pass --resume ... or --overwrite', and both then failed (issue 58.16)."""
    folder = tmp_path / "runs"
    folder.mkdir()
    for extra in ((), ("--overwrite",)):
        res = run_cli("probe-train", "--preset", "tiny", "--out", folder, *extra)
        assert res.returncode in (1, 2) and res.stderr.strip().splitlines() == [
            f"Error: {folder} is a folder; --out names the run file to write, e.g. {folder / 'run.h5'}"], res.stderr
    res = run_cli("probe-train", "--preset", "tiny", "--out", folder, "--resume")
    assert res.returncode in (1, 2) and res.stderr.strip() == f"Error: {folder}: is a directory, not a snapshot file"
    assert list(folder.iterdir()) == []
