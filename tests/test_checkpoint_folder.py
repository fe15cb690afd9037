"""A folder of one training's checkpoints is one run: a Trainer's checkpoint-N/ folders, numbered weight
files, hub revisions named by step. Steps from the names, every probe's --step on it, each checkpoint
read only when its step is, one line for a folder whose checkpoints do not hold one model."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli

STEPS = (10, 20, 30, 40)


def _gpt2(scale: float, n_embd: int = 16):
    """A tiny GPT-2 (seed 0) whose token embeddings share a direction of strength ``scale``: the
    checkpoints of one training differ a little, step by step."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_embd=n_embd, n_layer=2, n_head=4, vocab_size=50, n_positions=8))
    with torch.no_grad():
        model.transformer.wte.weight[:, 0] += 0.05 * scale
    return model


def _state(model) -> dict:
    """The model's weights as a plain state dict, the tied output head left out (safetensors refuses
    two names for one memory)."""
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}


@pytest.fixture(scope="module")
def trainer_dir(tmp_path_factory) -> Path:
    """A Trainer's output_dir: checkpoint-10/ ... checkpoint-40/, each a save_pretrained folder."""
    d = tmp_path_factory.mktemp("trainer") / "out"
    for k, step in enumerate(STEPS):
        _gpt2(k).save_pretrained(d / f"checkpoint-{step}")
    return d


@pytest.fixture(scope="module")
def files_dir(tmp_path_factory) -> Path:
    """Numbered state dicts of three steps, two kinds of file, the config beside them."""
    import torch
    from safetensors.torch import save_file

    d = tmp_path_factory.mktemp("files") / "ckpts"
    d.mkdir()
    save_file(_state(_gpt2(0)), str(d / "model_00100.safetensors"))
    save_file(_state(_gpt2(1)), str(d / "step-200.safetensors"))
    torch.save(_state(_gpt2(2)), d / "ckpt_300.pt")
    _gpt2(0).config.to_json_file(d / "config.json")
    (d / "notes.txt").write_text("not a checkpoint: left alone")
    return d


def test_a_trainer_folder_is_one_run_of_its_steps(trainer_dir):
    from probe.readers.source import open_source
    from probe.source import Source

    with open_source(trainer_dir) as run:
        assert isinstance(run, Source)
        assert run.n_snapshots == 4 and list(run.steps) == list(STEPS)
        assert run.step_indices("all") == [0, 1, 2, 3] and run.step_indices("latest") == [3]
        assert run.step_indices("15:35") == [1, 2] and run.step_indices("10,40") == [0, 3]
        assert [run.step_of(i) for i in range(4)] == list(STEPS)
        assert run.tensor("token_embedding").shape == (4, 50, 16)
        assert run.provenance["checkpoints"] == 4 and run.provenance["step"] == 40
        with pytest.raises(Exception, match="no snapshot at step 15"):
            run.step_indices("15")
    with open_source(trainer_dir / "checkpoint-20") as one:   # a model folder stays one checkpoint
        assert one.n_snapshots == 1 and list(one.steps) == [20]


def _similarity(path, step="latest"):
    import probe

    return probe.similarity(str(path), tokens="0:8", step=step)


def test_step_all_is_each_checkpoint_alone(trainer_dir):
    every = _similarity(trainer_dir, "all")
    assert [r.step for r in every] == list(STEPS)
    for r, step in zip(every, STEPS):
        alone = _similarity(trainer_dir / f"checkpoint-{step}")[0]
        assert alone.step == step
        np.testing.assert_array_equal(r.matrix, alone.matrix)
        assert r.mean_offdiag == alone.mean_offdiag and r.distance_corr == alone.distance_corr
    assert every[0].mean_offdiag < every[-1].mean_offdiag    # the shared direction grows over the steps
    assert [r.step for r in _similarity(trainer_dir, "20:40")] == [20, 30]


def test_the_cli_gives_one_row_per_step(trainer_dir):
    res = run_cli("probe", "similarity", trainer_dir, "--tokens", "0:8", "--step", "all", "--format", "csv")
    assert res.returncode == 0, res.stderr
    rows = [r for r in csv.DictReader(io.StringIO(res.stdout)) if r["metric"] == "mean_offdiag"]
    assert [int(r["step"]) for r in rows] == list(STEPS)
    assert [float(r["value"]) for r in rows] == pytest.approx([r.mean_offdiag for r in _similarity(trainer_dir, "all")])


def test_numbered_files_are_one_run(files_dir):
    import probe
    from probe.readers.source import open_source

    with open_source(files_dir) as run:
        assert list(run.steps) == [100, 200, 300] and run.dims == {"layers": 2, "heads": 4}
    every = _similarity(files_dir, "all")
    for r, name in zip(every, ("model_00100.safetensors", "step-200.safetensors", "ckpt_300.pt")):
        np.testing.assert_array_equal(r.matrix, _similarity(files_dir / name)[0].matrix)
    # the raw matrices of every step (a spectrum reads them by their own names), and the canonical ones
    spec = probe.spectrum(str(files_dir), step="all")
    assert [r.step for r in spec] == [100, 200, 300]
    alone = probe.spectrum(str(files_dir / "step-200.safetensors"))[0]
    assert spec[1].layers == alone.layers and spec[0].layers != alone.layers
    ranks = probe.rank(str(files_dir), step="all")
    assert [r.step for r in ranks] == [100, 200, 300]


def test_each_checkpoint_is_read_only_when_its_step_is(trainer_dir, tmp_path):
    d = tmp_path / "run"
    shutil.copytree(trainer_dir, d)
    (d / "checkpoint-20" / "model.safetensors").write_bytes(b"\x00" * 64)   # damaged: never opened unless asked for
    for step in ("latest", "30", "30:50", "10"):
        assert _similarity(d, step)
    from probe.errors import ProbeError

    with pytest.raises(ProbeError, match="checkpoint-20"):
        _similarity(d, "all")
    from probe.readers.source import HELD, open_source

    with open_source(trainer_dir) as run:   # a few held open at once, not every step read so far
        t = run.tensor("token_embedding")
        for i in (0, 1, 2, 3):
            t[i, 0:4]
        assert sorted(run._held) == [1, 2] and HELD == 2   # the newest (3) is always open


def test_a_folder_mixing_shapes_is_one_line(trainer_dir, tmp_path):
    d = tmp_path / "mixed"
    shutil.copytree(trainer_dir, d)
    shutil.rmtree(d / "checkpoint-20")
    _gpt2(1, n_embd=32).save_pretrained(d / "checkpoint-20")
    res = run_cli("probe", "similarity", d, "--tokens", "0:8", "--step", "all")
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    assert "checkpoint checkpoint-20 does not match the newest, checkpoint-40" in lines[0]
    assert re.search(r"tensor transformer\.\S+ is \[\d+(, \d+)*\] there, \[\d+(, \d+)*\] in the newest", lines[0])
    assert _similarity(d, "30:50")    # the steps that match are read


def test_a_folder_mixing_layouts_names_the_checkpoint(files_dir, tmp_path):
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    from probe.errors import ProbeError

    d = tmp_path / "two"
    shutil.copytree(files_dir, d)
    llama = LlamaForCausalLM(LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                         num_attention_heads=4, vocab_size=50))
    save_file(_state(llama), str(d / "step-50.safetensors"))
    with pytest.raises(ProbeError, match="checkpoint step-50.safetensors does not match the newest, ckpt_300.pt: "
                                         "it is a llama checkpoint, the newest a gpt2 one"):
        _similarity(d, "all")


def test_a_step_stated_twice_is_one_line(files_dir, tmp_path):
    d = tmp_path / "twice"
    shutil.copytree(files_dir, d)
    shutil.copy(d / "step-200.safetensors", d / "model_200.safetensors")
    from probe.errors import ProbeError

    with pytest.raises(ProbeError, match=r"two checkpoints state step 200 \(model_200.safetensors and "
                                         r"step-200.safetensors\); keep one of them there"):
        _similarity(d)


def test_info_names_the_steps(trainer_dir):
    res = run_cli("probe", "info", trainer_dir)
    assert res.returncode == 0, res.stderr
    assert "steps      4 checkpoints: 10, 20, 30, 40 (the newest described)" in res.stdout
    import probe

    assert probe.info(str(trainer_dir))["checkpoints"] == {s: f"checkpoint-{s}" for s in STEPS}


def test_batch_on_the_folder_matches_step_all(trainer_dir):
    from probe.batch import batch

    rows = batch([str(trainer_dir)], ["similarity"], {"tokens": "0:8"})
    got = {r[1]: r[5] for r in rows if r[4] == "mean_offdiag"}
    assert got == {r.step: r.mean_offdiag for r in _similarity(trainer_dir, "all")}


def test_report_shows_the_folders_trajectory_and_follows_new_checkpoints(trainer_dir, tmp_path):
    from probe.report import Report

    d = tmp_path / "growing"
    shutil.copytree(trainer_dir, d)
    page = tmp_path / "page.html"
    res = run_cli("probe", "report", d, "-o", page, "-p", "similarity", "--max-steps", "4")
    assert res.returncode == 0, res.stderr
    text = page.read_text()
    assert all(f"step {s}" in text for s in STEPS) and "over training (4 steps" in text
    rep = Report([str(d)], ["similarity"])
    before = rep.refresh()
    _gpt2(5).save_pretrained(d / "checkpoint-50")   # the training goes on: the watch sees a new step
    after = rep.refresh()
    assert before != after and rep.sources[0].steps == [*STEPS, 50]


def test_hub_revisions_named_by_step_are_one_run(tmp_path_factory):
    from test_hub import REPO, build_cache

    cache = build_cache(tmp_path_factory.mktemp("hub"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HOME": str(cache.parent / "home")}
    res = run_cli("probe", "similarity", f"hf:{REPO}@step2000,step1000", "--tokens", "0:8", "--step", "all",
                  "--format", "json", env=env)
    assert res.returncode == 0, res.stderr
    assert [r["step"] for r in json.loads(res.stdout)["results"]] == [1000, 2000]
    res = run_cli("probe", "similarity", f"hf:{REPO}@step1000,main", "--tokens", "0:8", env=env)
    assert res.returncode == 2 and "revision 'main' states no step" in res.stderr


def test_what_is_not_a_run(trainer_dir, files_dir, tmp_path):
    from probe.errors import ProbeError
    from probe.readers.source import open_source

    d = tmp_path / "unnumbered"
    d.mkdir()
    shutil.copy(files_dir / "step-200.safetensors", d / "final.safetensors")
    with pytest.raises(ProbeError, match=r"nor checkpoints whose names state a step \(checkpoint-500/"):
        open_source(d)
    top = tmp_path / "saved"     # a Trainer's output_dir after save_model: its top is one model, as before
    shutil.copytree(trainer_dir, top)
    for f in (top / "checkpoint-40").iterdir():
        shutil.copy(f, top / f.name)
    with open_source(top) as run:
        assert run.n_snapshots == 1


def _steps_of(csv_text: str) -> list[int]:
    return sorted({int(r["step"]) for r in csv.DictReader(io.StringIO(csv_text)) if r["metric"] == "mean_offdiag"})


def _warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("warning: ")]


def test_a_checkpoint_without_its_config_is_left_out_and_named(trainer_dir, tmp_path):
    """Issue 58 item 10: checkpoint-10 without config.json was refused as 'a gpt2 model of 2 layers and None
    heads', the missing file never named."""
    d = tmp_path / "noconfig"
    shutil.copytree(trainer_dir, d)
    (d / "checkpoint-10" / "config.json").unlink()
    res = run_cli("probe", "similarity", d, "--tokens", "0:8", "--step", "all", "--format", "csv")
    assert res.returncode == 0, res.stderr
    assert _steps_of(res.stdout) == [20, 30, 40]
    said = _warnings(res.stderr)
    assert len(said) == 1 and "checkpoint-10 left out of the run: no config.json beside its weights" in said[0]
    assert "copy the config.json of the model it holds there" in said[0]
    res = run_cli("probe", "similarity", d, "--tokens", "0:8", "--step", "10")   # asked for: why it is not there
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and lines[-1].startswith("Error: ") and "None heads" not in res.stderr, res.stderr
    assert "no snapshot at step 10: checkpoint-10 is left out of the run (no config.json beside its weights" \
        in lines[-1]


def test_an_empty_checkpoint_and_one_without_weights_are_named(trainer_dir, tmp_path):
    """Issue 58 item 13: a checkpoint missing its weights file and an empty checkpoint-40 vanished from the
    series with no word, in the table, batch and the report alike."""
    d = tmp_path / "holes"
    shutil.copytree(trainer_dir, d)
    (d / "checkpoint-30" / "model.safetensors").unlink()
    shutil.rmtree(d / "checkpoint-40")
    (d / "checkpoint-40").mkdir()
    want = [f"{d}: checkpoint-30 left out of the run: no weights file (model.safetensors, ",
            f"{d}: checkpoint-40 left out of the run: an empty folder"]

    def said(stderr):
        lines = _warnings(stderr)
        return len(lines) == 2 and all(w in ln for w, ln in zip(want, lines))

    res = run_cli("probe", "similarity", d, "--tokens", "0:8", "--step", "all", "--format", "csv")
    assert res.returncode == 0 and _steps_of(res.stdout) == [10, 20] and said(res.stderr), res.stderr
    res = run_cli("probe", "batch", d, "-p", "similarity", "--tokens", "0:8", "--format", "csv")
    assert res.returncode == 0 and _steps_of(res.stdout) == [10, 20] and said(res.stderr), res.stderr
    res = run_cli("probe", "report", d, "-o", tmp_path / "holes.html", "-p", "similarity")
    assert res.returncode == 0 and said(res.stderr), res.stderr
    import probe

    with pytest.warns(probe.ProbeWarning) as caught:
        assert [r.step for r in _similarity(d, "all")] == [10, 20]
    assert said("\n".join(f"warning: {w.message}" for w in caught))


def _truncated(trainer_dir, tmp_path) -> Path:
    d = tmp_path / "cut"
    shutil.copytree(trainer_dir, d)
    f = d / "checkpoint-20" / "model.safetensors"
    with open(f, "r+b") as fh:   # a copy cut short, as a full disk or a killed save leaves it
        fh.truncate(f.stat().st_size // 2)
    return d


def test_a_damaged_checkpoint_stops_the_table_and_says_how_to_go_on(trainer_dir, tmp_path):
    d = _truncated(trainer_dir, tmp_path)
    res = run_cli("probe", "similarity", d, "--tokens", "0:8", "--step", "all")
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    assert "checkpoint-20/model.safetensors: not a valid safetensors file" in lines[0]
    assert lines[0].endswith("; --skip-damaged leaves step 20 out and reads the others")


def test_skip_damaged_gives_the_good_steps_and_a_warning_per_step_left_out(trainer_dir, tmp_path):
    import probe

    d = _truncated(trainer_dir, tmp_path)
    res = run_cli("probe", "similarity", d, "--tokens", "0:8", "--step", "all", "--skip-damaged", "--format", "csv")
    assert res.returncode == 0, res.stderr
    assert _steps_of(res.stdout) == [10, 30, 40]
    said = _warnings(res.stderr)
    assert len(said) == 1 and said[0].startswith(f"warning: {d}: step 20 left out (--skip-damaged): "), res.stderr
    assert "checkpoint-20/model.safetensors: not a valid safetensors file" in said[0]
    with pytest.warns(probe.ProbeWarning, match=r"step 20 left out \(skip_damaged=True\)"):
        got = probe.similarity(str(d), tokens="0:8", step="all", skip_damaged=True)
    assert [r.step for r in got] == [10, 30, 40]
    for r, good in zip(got, [r for r in _similarity(trainer_dir, "all") if r.step != 20]):
        np.testing.assert_array_equal(r.matrix, good.matrix)
    # the other probes of a folder's steps take it too
    for fn, more in ((probe.rank, {}), (probe.spectrum, {}), (probe.condense, {"tokens": "0:8"}),
                     (probe.pca, {"tokens": "0:8"}), (probe.cohesion, {"tokens": "0:8"}), (probe.rank_trajectory, {})):
        with pytest.warns(probe.ProbeWarning, match="step 20 left out"):
            got = fn(str(d), step="all", skip_damaged=True, **more)
        assert [r.step for r in got] == [10, 30, 40] or got[0].steps == [10, 30, 40], fn.__name__
    # the newest damaged: the run is the steps before it
    shutil.copy(d / "checkpoint-20" / "model.safetensors", d / "checkpoint-40" / "model.safetensors")
    with pytest.warns(probe.ProbeWarning) as caught:
        assert [r.step for r in probe.similarity(str(d), tokens="0:8", step="all", skip_damaged=True)] == [10, 30]
    assert sorted(re.search(r"step (\d+) left out", str(w.message))[1] for w in caught) == ["20", "40"]
    with pytest.raises(probe.ProbeError, match="--skip-damaged|skip_damaged=True leaves step 40 out"):
        _similarity(d, "latest")


def test_batch_and_the_report_go_on_past_a_damaged_checkpoint_and_say_so(trainer_dir, tmp_path):
    d = _truncated(trainer_dir, tmp_path)
    # batch reads each checkpoint as a task: a damaged one is an error row and exit 1 ...
    res = run_cli("probe", "batch", d, "-p", "similarity", "--tokens", "0:8", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert res.returncode == 1 and [r["step"] for r in rows if r["metric"] == "error"] == ["20"], res.stderr
    # ... with --skip-damaged a warning row, as --step all's warning line, and exit 0
    res = run_cli("probe", "batch", d, "-p", "similarity", "--tokens", "0:8", "--format", "csv", "--skip-damaged")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert res.returncode == 0 and _steps_of(res.stdout) == [10, 30, 40], res.stderr
    assert [(r["step"], r["value"].split(": ")[0]) for r in rows if r["metric"] in ("error", "warning")] == \
        [("20", "step 20 left out")]
    # the report shows the good steps and names the one left out, on the page and on stderr
    page = tmp_path / "cut.html"
    res = run_cli("probe", "report", d, "-o", page, "-p", "similarity")
    said = _warnings(res.stderr)
    assert res.returncode == 0 and len(said) == 1, res.stderr
    assert said[0].startswith(f"warning: report: cut: step 20 left out: ") and "not a valid safetensors" in said[0]
    text = page.read_text()
    assert all(f"step {s}" in text for s in (10, 30, 40)) and "step 20 left out: " in text
