"""The callbacks (issue 50, point 3): the real transformers.Trainer and the real Lightning Trainer, offline,
on the CPU, a few steps of a tiny randomly initialised GPT-2; the file they record is checked as any run."""
import warnings

import numpy as np
import pytest
import torch

import probe

from conftest import run_cli
from probe.format import Run


def _gpt2():
    import transformers as T

    T.logging.set_verbosity_error()
    torch.manual_seed(0)
    return T.GPT2LMHeadModel(T.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32,
                                          attn_implementation="eager"))


class Sequences(torch.utils.data.Dataset):
    """Random token windows, each its own label (a language-model batch)."""

    def __init__(self, n):
        self.x = torch.randint(0, 100, (n, 16), generator=torch.Generator().manual_seed(0))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


def test_the_transformers_trainer_callback_records_steps_with_their_logs(tmp_path):
    import transformers as T

    from probe.callbacks import TransformersCallback

    args = T.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=12, logging_steps=2, eval_strategy="steps",
                               eval_steps=4, per_device_train_batch_size=4, per_device_eval_batch_size=8,
                               learning_rate=1e-3, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True)
    path = tmp_path / "run.h5"
    cb = TransformersCallback(path, every=4, groups={"low": [1, 2, 3]},
                              probe_inputs=torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(1)))
    trainer = T.Trainer(model=_gpt2(), args=args, train_dataset=Sequences(32), eval_dataset=Sequences(8),
                        callbacks=[cb])
    with warnings.catch_warnings():
        warnings.simplefilter("error", probe.ProbeWarning)   # the Trainer's runtimes and counts are not named
        trainer.train()
    with Run(path) as run:
        assert list(run.steps) == [0, 4, 8, 12] and run.splits == ["train", "eval"]
        m = run.metrics()
        assert np.isnan(m["train"]["loss"][0]) and np.isfinite(m["train"]["loss"][1:]).all()
        assert np.isfinite(m["eval"]["loss"][1:]).all()
        logged = {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}
        assert sorted(logged) == [2, 4, 6, 8, 10, 12]
        assert m["train"]["loss"][1:].tolist() == pytest.approx([logged[s] for s in (4, 8, 12)])
        # every logging step's loss is in the step log, due or not; the other steps are marked not given
        given = np.flatnonzero(run.step_logged())
        assert given.tolist() == [2, 4, 6, 8, 10]   # (the log is read up to the last snapshot's step, 12)
        assert run.step_losses()[given].tolist() == pytest.approx([logged[s] for s in given])
        assert np.isfinite(run.h5["snapshots/recorded/learning_rate"][1:]).all()
        # the last snapshot is the trained model
        np.testing.assert_array_equal(run.tensor("token_embedding")[3],
                                      trainer.model.transformer.wte.weight.detach().numpy())
    assert run_cli("probe", "validate", path).returncode == 0
    d = probe.dynamics(path)[0]   # read at the logged steps: no "no steps logged", no NaN taken for a loss
    assert d.steps_logged == 5 and np.isfinite([d.initial_loss, d.final_loss]).all() and not d.warnings
    res = run_cli("probe", "similarity", path, "--tokens", "0:20", "--step", "all", "--format", "csv")
    assert res.returncode == 0 and {r.split(",")[0] for r in res.stdout.splitlines()[1:]} == {"0", "4", "8", "12"}


def test_the_lightning_callback_records_a_lightning_module(tmp_path):
    import lightning.pytorch as L

    from probe.callbacks import LightningCallback

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = _gpt2()

        def training_step(self, batch, i):
            loss = self.model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch, i):
            loss = self.model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
            self.log("val_loss", loss)
            seen.append((self.trainer.global_step, float(loss)))

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), 1e-3)

    seen = []

    path = tmp_path / "run.h5"
    module = Module()
    trainer = L.Trainer(max_steps=6, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, val_check_interval=2,
                        num_sanity_val_steps=0, callbacks=[LightningCallback(
                            path, every=2, metrics=["loss", "val_loss"],
                            probe_inputs=torch.zeros((1, 8), dtype=torch.long))])
    with warnings.catch_warnings():
        warnings.simplefilter("error", probe.ProbeWarning)   # nothing it was not asked to keep is named
        trainer.fit(module, torch.utils.data.DataLoader(Sequences(24), batch_size=4),
                    torch.utils.data.DataLoader(Sequences(4), batch_size=4))
    with Run(path) as run:
        assert list(run.steps) == [0, 2, 4, 6] and run.config["layout"] == "gpt2"
        m = run.metrics()
        assert np.isfinite(m["train"]["loss"][1:]).all()
        # each snapshot holds its own step's validation (Lightning validates after the batch's hook)
        assert m["val"]["loss"][1:].tolist() == pytest.approx([v for _, v in seen], rel=1e-6)
        assert len(run.dataset("step_loss")[:]) == 7   # steps 0..6: every step's training loss
        np.testing.assert_array_equal(run.tensor("layer0/W_in")[3], module.model.transformer.h[0].mlp.c_fc.weight
                                      .detach().numpy())
        assert run.dataset("attention").shape == (4, 2, 2, 1, 8, 8)
    assert run_cli("probe", "validate", path).returncode == 0

