"""Recording loses nothing (issue 58): a model moved, cast or resized after its Recorder was made, tied
and chosen tensors, groups and models checked when a file is continued, a full disk in the middle of a
loop, a Recorder dropped without close(), and the resumed Trainer and Lightning runs, each compared
step by step with the uninterrupted run. Real tiny GPT-2s, real files, real SIGKILLs, a real tmpfs."""
import gc
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import probe
from conftest import run_cli
from probe.format import Run


def _gpt2(vocab=64, layers=2, seed=0, dropout=0.1):
    import transformers as T

    T.logging.set_verbosity_error()
    torch.manual_seed(seed)
    return T.GPT2LMHeadModel(T.GPT2Config(n_layer=layers, n_head=2, n_embd=32, vocab_size=vocab, n_positions=16,
                                          attn_implementation="eager", resid_pdrop=dropout, embd_pdrop=dropout,
                                          attn_pdrop=dropout))


def _update(model):
    x = torch.randint(0, model.config.vocab_size, (4, 8), generator=torch.Generator().manual_seed(0))
    opt = torch.optim.SGD(model.parameters(), 0.1)
    loss = model(input_ids=x, labels=x).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.item()


def test_a_model_given_new_storage_after_its_recorder_is_read_as_it_is_now(tmp_path):
    model = _gpt2()
    with probe.Recorder(tmp_path / "r.h5", model, every=1) as rec:
        rec.step(0, loss=1.0)
        model.to(torch.bfloat16)   # new tensors for every parameter (as model.to("cuda") gives)
        _update(model)
        rec.step(1, loss=1.0)
    with Run(tmp_path / "r.h5") as run:
        emb = run.tensor("token_embedding")
        assert not np.array_equal(emb[0], emb[1])
        np.testing.assert_array_equal(emb[1], model.transformer.wte.weight.detach().float().numpy())
        np.testing.assert_array_equal(run.tensor("layer0.W_in")[1],
                                      model.transformer.h[0].mlp.c_fc.weight.detach().float().numpy())
    model = _gpt2()
    with probe.Recorder(tmp_path / "s.h5", model, every=1) as rec:
        rec.step(0, loss=1.0)
        model.resize_token_embeddings(80)
        with pytest.raises(probe.ProbeError, match=r"'token_embedding' is now \(80, 32\), \(64, 32\) when recording "
                                                   r"began \(the model was resized\); record the resized model"):
            rec.step(1, loss=1.0)
    with Run(tmp_path / "s.h5") as run:   # nothing of the refused snapshot was written
        assert list(run.steps) == [0]
    assert run_cli("probe", "validate", tmp_path / "s.h5").returncode == 0


def test_a_tied_head_is_stored_once_and_keep_chooses_the_tensors(tmp_path):
    model = _gpt2()
    with probe.Recorder(tmp_path / "all.h5", model, every=1) as rec:
        rec.step(0, loss=1.0)
    with probe.Recorder(tmp_path / "some.h5", model, every=1, keep=["token_embedding", "layer*/W_V"]) as rec:
        rec.step(0, loss=1.0)
    with Run(tmp_path / "all.h5") as run:
        assert "unembedding" not in run.weights() and run.config["tied"] == {"unembedding": "token_embedding"}
        stored = sum(int(np.prod(s)) for n, s in run.tensors().items() if "/" not in n or n == "token_embedding")
    n_params = sum(p.numel() for p in model.parameters())   # (torch counts a tied parameter once)
    assert stored == n_params
    info = run_cli("probe", "info", tmp_path / "all.h5").stdout
    assert "tied       unembedding is token_embedding (stored once)" in info
    with Run(tmp_path / "some.h5") as run:
        assert sorted(run.weights()) == ["layer0/W_V", "layer1/W_V", "token_embedding"]
        assert sorted(run.tensors()) == ["layer0.W_V", "layer0/W_V", "layer1.W_V", "layer1/W_V", "token_embedding"]
        assert run.dims["layers"] == 2 and run.dims["heads"] == 2   # the model's sizes, whatever is kept
        assert "layer0/W_Q" in run.task["left_out"]
        with pytest.raises(probe.ProbeError, match="'layer0/W_Q' was not kept when this run was recorded"):
            run.tensor("layer0/W_Q")
    assert run_cli("probe", "validate", tmp_path / "some.h5").returncode == 0
    res = run_cli("probe", "info", tmp_path / "some.h5")
    assert res.returncode == 0 and "left out   " in res.stdout
    assert run_cli("probe", "similarity", tmp_path / "some.h5", "--tokens", "0:16").returncode == 0
    assert os.path.getsize(tmp_path / "some.h5") < os.path.getsize(tmp_path / "all.h5") / 3
    with pytest.raises(probe.ProbeError, match=r"keep: 'layer\*/W_VV' matches no tensor of this model"):
        probe.Recorder(tmp_path / "x.h5", model, keep=["layer*/W_VV"])
    with pytest.raises(probe.ProbeError, match="recorded with other tensors kept"):
        probe.Recorder(tmp_path / "some.h5", model, keep=["token_embedding"])


def test_groups_are_checked_against_the_vocabulary_and_the_continued_file(tmp_path):
    model = _gpt2()
    with pytest.raises(probe.ProbeError, match=r"token group 'far': token id 70 is outside the model's vocabulary "
                                               r"of 64 tokens \(0 to 63\); 1 more"):
        probe.Recorder(tmp_path / "r.h5", model, groups={"far": [70, 100]})
    assert not (tmp_path / "r.h5").exists()
    with probe.Recorder(tmp_path / "r.h5", model, every=1, groups={"low": [1, 2]}) as rec:
        rec.step(0, loss=1.0)
    with pytest.raises(probe.ProbeError, match=r"groups differ from the token groups it was recorded with \(low\)"):
        probe.Recorder(tmp_path / "r.h5", model, groups={"low": [1, 2, 3]})
    with probe.Recorder(tmp_path / "r.h5", model, every=1, groups={"low": [1, 2]}) as rec:   # the same: fine
        rec.step(1, loss=1.0)
    with probe.Recorder(tmp_path / "r.h5", model, every=1) as rec:   # none: the file's
        rec.step(2, loss=1.0)
    with pytest.raises(probe.ProbeError, match=r"metrics \['acc'\] differ from those it records"):
        probe.Recorder(tmp_path / "r.h5", model, metrics=["acc"])
    with pytest.raises(probe.ProbeError, match="recorded every 1 steps, not every 5; pass every=1"):
        probe.Recorder(tmp_path / "r.h5", model, every=5)
    with pytest.raises(probe.ProbeError, match=r"config differs from the one it was recorded with \(none\)"):
        probe.Recorder(tmp_path / "r.h5", model, every=1, config={"gamma": 0.5})
    with Run(tmp_path / "r.h5") as run:
        assert list(run.steps) == [0, 1, 2] and run.groups["low"].tolist() == [1, 2]


def test_a_shallower_model_is_refused_when_it_continues_a_deeper_ones_file(tmp_path):
    with probe.Recorder(tmp_path / "r.h5", _gpt2(layers=2), every=1) as rec:
        rec.step(0, loss=1.0)
    with pytest.raises(probe.ProbeError, match=r"recorded from another model \('layer1.W_K' is \(2, 32, 16\) there, "
                                               r"absent here\)"):
        probe.Recorder(tmp_path / "r.h5", _gpt2(layers=1))
    with probe.Recorder(tmp_path / "r.h5", _gpt2(layers=2), every=1) as rec:   # (refused, the path is free)
        rec.step(1, loss=1.0)


def _tmpfs(path, size_kb):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a full disk is a small tmpfs: it needs root")
    path.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(path)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.strip()})")


def test_a_loop_that_goes_on_after_a_full_disk_records_again_once_there_is_room(tmp_path):
    disk = tmp_path / "disk"
    _tmpfs(disk, 2048)
    try:
        model = _gpt2()
        path = disk / "r.h5"
        done, failed = [], []
        with probe.Recorder(path, model, every=1) as rec:
            for step in range(6):
                if step == 2:   # fill the disk, leaving less than a snapshot
                    free = shutil.disk_usage(disk).free
                    with open(disk / "filler", "wb") as fh:
                        fh.write(b"\0" * max(0, free - 20_000))
                if step == 4:
                    os.unlink(disk / "filler")
                try:   # a loop that keeps training through a failed snapshot, as the error says it may
                    rec.step(step, loss=float(step))
                    done.append(step)
                except probe.ProbeError as exc:
                    assert "no space left on device while writing" in str(exc), str(exc)
                    failed.append(step)
        assert failed == [2, 3] and done == [0, 1, 4, 5]
        res = run_cli("probe", "validate", path)
        assert res.returncode == 0, res.stdout + res.stderr
        with Run(path) as run:
            assert list(run.steps) == [0, 1, 4, 5]
            np.testing.assert_array_equal(run.tensor("token_embedding")[3], model.transformer.wte.weight.detach().numpy())
            assert run.step_losses().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]   # the failed steps' losses too
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_recorder_dropped_without_close_frees_its_path_when_collected(tmp_path):
    path = tmp_path / "r.h5"

    def loop():
        rec = probe.Recorder(path, _gpt2(), every=1)
        rec.step(0, loss=1.0)
        rec.cycle = rec   # (a reference cycle: only the collector frees it)
        raise RuntimeError("the loop failed")

    with pytest.raises(RuntimeError):
        loop()
    gc.collect()   # (pytest's ExceptionInfo held the frame; the next Recorder collects on its own too)
    with probe.Recorder(path, _gpt2(), every=1) as rec:   # before the fix: "being written by another Recorder"
        rec.step(1, loss=1.0)
    with Run(path) as run:
        assert list(run.steps) == [0, 1]


SEQS = """
class Seqs(torch.utils.data.Dataset):
    def __init__(self, n):
        self.x = torch.randint(0, 64, (n, 16), generator=torch.Generator().manual_seed(0))
    def __len__(self):
        return len(self.x)
    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}

def gpt2():
    torch.manual_seed(0)
    return T.GPT2LMHeadModel(T.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16,
                                          attn_implementation="eager", resid_pdrop=DROPOUT, embd_pdrop=DROPOUT,
                                          attn_pdrop=DROPOUT))
"""

TRAINER = textwrap.dedent("""
    import os, signal, sys
    import torch, transformers as T
    from probe.callbacks import TransformersCallback
    T.logging.set_verbosity_error()
    out, path, kill_at, resume = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    DROPOUT = 0.1   # (the Trainer's checkpoint keeps the RNG: dropout resumes the same)
""") + SEQS + textwrap.dedent("""
    class Kill(T.TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    args = T.TrainingArguments(output_dir=out, max_steps=40, save_steps=10, logging_steps=5, per_device_train_batch_size=4,
                               learning_rate=1e-3, report_to=[], use_cpu=True, disable_tqdm=True, seed=0)
    trainer = T.Trainer(model=gpt2(), args=args, train_dataset=Seqs(32),
                        callbacks=[TransformersCallback(path, every=5), Kill()])
    trainer.train(resume_from_checkpoint=True if resume else None)
""")

LIGHTNING = textwrap.dedent("""
    import os, signal, sys
    import torch, transformers as T, lightning.pytorch as L
    from probe.callbacks import LightningCallback
    T.logging.set_verbosity_error()
    out, path, kill_at, resume = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    DROPOUT = 0.0   # (Lightning's checkpoint keeps no RNG state, and this loader no position: a resume is exact only so)
""") + SEQS + textwrap.dedent("""
    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = gpt2()
        def training_step(self, batch, i):
            return self.model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), 1e-3)

    class Kill(L.Callback):
        def on_train_batch_end(self, trainer, *a):
            if trainer.global_step == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    saves = L.callbacks.ModelCheckpoint(dirpath=out, every_n_train_steps=10, save_last=True, save_top_k=-1)
    trainer = L.Trainer(max_steps=40, accelerator="cpu", logger=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[saves, LightningCallback(path, every=5), Kill()])
    trainer.fit(Module(), torch.utils.data.DataLoader(Seqs(40), batch_size=4), ckpt_path="last" if resume else None)
""")


def _same_file(a, b):
    """Two recorded files hold the same snapshots: steps, every tensor, metrics, the step log."""
    with Run(a) as x, Run(b) as y:
        assert list(x.steps) == list(y.steps) == list(range(0, 41, 5))
        assert x.tensors() == y.tensors()
        for name in x.tensors():
            np.testing.assert_array_equal(x.tensor(name)[...], y.tensor(name)[...], err_msg=name)
        for split, metrics in x.metrics().items():
            for m, v in metrics.items():
                np.testing.assert_allclose(v, y.metrics()[split][m], rtol=1e-6, err_msg=f"{split}/{m}")
        np.testing.assert_allclose(x.step_losses()[:41], y.step_losses()[:41], rtol=1e-6)
        np.testing.assert_array_equal(x.step_logged()[:41], y.step_logged()[:41])


@pytest.mark.parametrize("script, kill_at", [(TRAINER, 27), (LIGHTNING, 22)], ids=["transformers", "lightning"])
def test_a_training_killed_after_a_checkpoint_and_resumed_gives_the_uninterrupted_file(tmp_path, script, kill_at):
    loop = tmp_path / "loop.py"
    loop.write_text(script)

    def train(out, path, kill, resume):
        res = subprocess.run([sys.executable, str(loop), str(tmp_path / out), str(tmp_path / path), str(kill),
                              "1" if resume else "0"], capture_output=True, text=True)
        return res.returncode, res.stderr

    assert train("whole", "whole.h5", -1, False)[0] == 0
    rc, err = train("cut", "cut.h5", kill_at, False)
    assert rc == -9, err   # killed by its own SIGKILL, past the checkpoint of step 20, the file at 25 or 20
    with Run(tmp_path / "cut.h5") as run:
        assert run.steps[-1] >= 20
    rc, err = train("cut", "cut.h5", -1, True)
    assert rc == 0, err
    _same_file(tmp_path / "whole.h5", tmp_path / "cut.h5")
    assert run_cli("probe", "validate", tmp_path / "cut.h5").returncode == 0


class _Repeated(torch.utils.data.Dataset):
    """``n`` copies of one window 0..15, its own label: a Trainer's data where the data does not matter."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = torch.arange(16) % 64
        return {"input_ids": x, "labels": x}


def test_a_trainer_run_again_after_an_exception_resumes_into_the_file_its_callback_left(tmp_path):
    import transformers as T

    from probe.callbacks import TransformersCallback

    class Fail(T.TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == 7 and not failed:
                failed.append(7)
                raise RuntimeError("the loop failed")

    failed = []
    args = T.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=10, logging_steps=5, save_steps=5,
                               per_device_train_batch_size=4, report_to=[], use_cpu=True, disable_tqdm=True)
    trainer = T.Trainer(model=_gpt2(), args=args, train_dataset=_Repeated(32),
                        callbacks=[TransformersCallback(tmp_path / "run.h5", every=5), Fail()])
    with pytest.raises(RuntimeError, match="the loop failed"):
        trainer.train()
    trainer.train(resume_from_checkpoint=True)   # before: "being written by another Recorder of this process"
    with Run(tmp_path / "run.h5") as run:
        assert list(run.steps) == [0, 5, 10]


def test_a_trainer_logging_every_quarter_of_its_steps_is_recorded_at_those_steps(tmp_path):
    import transformers as T

    from probe.callbacks import TransformersCallback

    args = T.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=20, logging_steps=0.25, save_strategy="no",
                               per_device_train_batch_size=4, report_to=[], use_cpu=True, disable_tqdm=True)
    T.Trainer(model=_gpt2(), args=args, train_dataset=_Repeated(16), callbacks=[TransformersCallback(tmp_path / "run.h5")]).train()
    with Run(tmp_path / "run.h5") as run:   # before: "every=0.25: need an integer at least 1"
        assert list(run.steps) == [0, 5, 10, 15, 20]


def test_an_unknown_tensor_names_the_nearest_not_all_of_them(tmp_path):
    with probe.Recorder(tmp_path / "r.h5", _gpt2(), every=1) as rec:
        rec.step(0, loss=1.0)
    with Run(tmp_path / "r.h5") as run, pytest.raises(probe.ProbeError) as err:
        run.tensor("layer9/W_Q")
    message = str(err.value)   # before: all 48 names on one line
    assert "the nearest: layer" in message and {"layer0/W_Q", "layer1/W_Q"} <= set(message.replace(",", " ").split())
    assert "45 more (probe info" in message and len(message) - 2 * len(str(tmp_path / "r.h5")) < 150, message


def test_a_run_made_anew_within_the_same_second_is_another_run_to_a_watcher(tmp_path):
    """The watcher tells runs apart by their creation stamp: to the second, a run restarted at once with
    --overwrite (same config) was the old run, and its page mixed the two (issue 58, the faults set)."""
    from probe.report.sources import open_run

    path = tmp_path / "r.h5"
    stamps = []
    for _ in range(2):
        with probe.Recorder(path, _gpt2(), every=1, overwrite=True) as rec:
            rec.step(0, loss=1.0)
        stamps.append(open_run(str(path)).identity)
        with Run(path) as run:
            assert "." in run.h5.attrs["created"]   # to the microsecond (2026-12-07T19:31:05.123456+00:00)
    assert stamps[0] != stamps[1]
