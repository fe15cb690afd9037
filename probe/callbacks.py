"""Callbacks that record a run where people train: Hugging Face's ``transformers.Trainer`` and Lightning's
``Trainer``. Each is a thin wrapper over :class:`probe.Recorder`; the library it plugs into is an
optional extra (``pip install 'gamma-probe[transformers]'``, ``'gamma-probe[lightning]'``) and is
imported only when the callback is made.

>>> from probe.callbacks import TransformersCallback
>>> trainer = transformers.Trainer(model, args, train_dataset=ds,
...                                callbacks=[TransformersCallback("run.h5", every=50)])
"""
from __future__ import annotations

import os

from .errors import ProbeError

#: what the Hugging Face Trainer logs and a recorded snapshot keeps (eval_loss: the split "eval")
TRAINER_METRICS = ("loss", "eval_loss", "learning_rate", "grad_norm")


def _base(module: str, name: str, extra: str):
    """The callback base class of library ``module``; a one-line error naming the extra without it."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        raise ProbeError(f"this callback needs {module.split('.')[0]}: pip install 'gamma-probe[{extra}]'") from None


def TransformersCallback(path: str | os.PathLike, every: int | None = None, **recorder):
    """A ``transformers.TrainerCallback`` that records the model every ``every`` optimizer steps.

    Parameters
    ----------
    path : str or os.PathLike
        The snapshot file (:class:`probe.Recorder`: a resumed training continues it).
    every : int, optional
        Record every ``every`` optimizer steps (``state.global_step``) and at step 0; default: the
        Trainer's ``logging_steps``.
    **recorder
        The :class:`probe.Recorder` arguments (``groups``, ``tokenizer``, ``probe_inputs``, ``metrics``
        ...). ``metrics`` defaults to :data:`TRAINER_METRICS`.

    Each snapshot keeps what the Trainer logged at its step (its training loss averaged since the
    previous log, ``eval_loss`` when it evaluated then, the learning rate): the weights are taken
    before the next update, once the step's logs are in. The loss of every logging step goes into the
    file's step log (``probe dynamics`` reads it at those steps).
    """
    base = _base("transformers", "TrainerCallback", "transformers")

    class _Callback(base):
        def __init__(self):
            self.rec = None
            self.pending: int | None = None     # a due step whose logs may still come
            self.logs: dict = {}

        def on_train_begin(self, args, state, _control, model=None, **kw):
            from .recorder import Recorder

            recorder.setdefault("metrics", TRAINER_METRICS)
            if self.rec is not None:   # a train() after one that raised (on_train_end never came): its file closed
                self.rec.close()
            # a run resumed from a checkpoint (the Trainer has restored its step by now) goes on from
            # that step: what the file holds past it (a kill after the checkpoint) is recorded again
            resumed = {"resume_from": state.global_step} if state.global_step > 0 else {}
            # (state.logging_steps: the Trainer's own count, a ratio of max_steps such as 0.1 turned into steps)
            steps = every or int(getattr(state, "logging_steps", None) or args.logging_steps)
            self.rec = Recorder(path, model, steps, **resumed, **recorder)
            if state.global_step == 0:
                self.rec.snapshot(0)

        def on_step_end(self, args, state, _control, **kw):
            if self.rec.due(state.global_step):
                self.flush()
                self.pending, self.logs = state.global_step, {}

        def on_log(self, args, state, _control, logs=None, **kw):
            logs = logs or {}
            if self.pending == state.global_step:   # what it records (not the Trainer's runtimes and counts)
                self.logs.update({k: v for k, v in logs.items()
                                  if (k in self.rec.metrics or k == "epoch") and isinstance(v, (int, float))})
            elif isinstance(logs.get("loss"), (int, float)) and not self.rec.due(state.global_step):
                self.rec.step(state.global_step, loss=logs["loss"])   # the step log, at each logging step

        def on_step_begin(self, args, state, _control, **kw):
            self.flush()   # the weights are still those of the pending step: no update came since

        def on_train_end(self, args, state, _control, **kw):
            try:
                self.flush()
            finally:
                self.rec.close()

        def flush(self):
            if self.pending is not None:
                self.rec.step(self.pending, **self.logs)   # (a due step: its snapshot, its loss in the log)
                self.pending = None

    return _Callback()


def LightningCallback(path: str | os.PathLike, every: int = 100, **recorder):
    """A ``lightning.pytorch.Callback`` that records the LightningModule every ``every`` optimizer steps
    (``trainer.global_step``) and at step 0, with the training step's ``loss`` and the logged
    ``callback_metrics`` of that step (its validation's too: the snapshot is written once the step's
    validation has run, before the next update) named in ``metrics`` (default ``("loss",)``; ``val_loss`` becomes the split
    "val"). ``**recorder``: the :class:`probe.Recorder` arguments. A Hugging Face model inside the
    module is found by its config."""
    base = _base("lightning.pytorch", "Callback", "lightning")

    class _Callback(base):
        def __init__(self):
            self.rec = None
            self.last: int | None = None
            self.pending = None   # (step, loss) of a due step: written once its validation has run

        def on_train_start(self, trainer, pl_module):
            from .recorder import Recorder

            # (not on_fit_start: Lightning restores a checkpoint's global_step after it, before this)
            recorder.setdefault("metrics", ("loss",))
            if self.rec is not None:   # a fit after one that raised without on_exception: its file closed
                self.rec.close()
            step = trainer.global_step
            self.rec = Recorder(path, pl_module, every, **({"resume_from": step} if step > 0 else {}), **recorder)
            self.last = step
            if step == 0:
                self.rec.snapshot(0)

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, _batch_idx):
            step = trainer.global_step   # optimizer steps: the same for the batches one step accumulates
            if step == self.last:
                return
            self.last = step
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if self.rec.due(step):   # Lightning validates after this hook: the snapshot waits for it
                self.pending = (step, loss)
            else:
                self.rec.step(step, **({} if loss is None else {"loss": loss}))   # the step log

        def on_train_batch_start(self, trainer, pl_module, batch, _batch_idx):
            self.flush(trainer)   # no update since the pending step: its weights

        def on_fit_end(self, trainer, pl_module):
            if self.rec is None:   # (a fit that never trained: max_steps already reached)
                return
            try:
                self.flush(trainer)
            finally:
                self.rec.close()

        def on_exception(self, trainer, pl_module, _exception):
            if self.rec is not None:
                self.rec.close()

        def flush(self, trainer):
            if self.pending is None:
                return
            (step, loss), self.pending = self.pending, None
            metrics = {k: v for k, v in trainer.callback_metrics.items()
                       if k in self.rec.metrics and getattr(v, "numel", lambda: 1)() == 1}
            if loss is not None:
                metrics["loss"] = loss
            self.rec.step(step, **metrics)

    return _Callback()
