"""Probe's one door into the trainer: rebuild a run's task and model from its snapshot file, and
the loss and accuracy of a model on a set of sequences — one function for the trainer and the
probes, so metrics a probe recomputes from stored weights equal the logged ones exactly."""
from __future__ import annotations

from dataclasses import fields

import numpy as np
import torch
import torch.nn.functional as F

from probe.errors import ProbeError
from probe.format import Run

from .config import RunConfig


@torch.no_grad()
def evaluate(model, tokens: torch.Tensor, key_pos: torch.Tensor, labels: torch.Tensor, chunk: int = 4096
             ) -> tuple[float, float, torch.Tensor]:
    """(mean cross-entropy, accuracy, logits) over the sequences; NaNs for an empty set."""
    if len(labels) == 0:
        return float("nan"), float("nan"), torch.empty(0, 0)
    was_training = model.training
    model.eval()
    losses, correct, logits_all = [], [], []
    for start in range(0, len(labels), chunk):
        sl = slice(start, start + chunk)
        logits = model(tokens[sl], key_pos[sl])
        y = labels[sl]
        losses.append(F.cross_entropy(logits, y, reduction="sum"))
        correct.append((logits.argmax(-1) == y).sum())
        logits_all.append(logits)
    model.train(was_training)
    n = len(labels)
    return float(torch.stack(losses).sum()) / n, float(torch.stack(correct).sum()) / n, torch.cat(logits_all)


@torch.no_grad()
def evaluate_lm(model, tokens: torch.Tensor, targets: torch.Tensor, chunk: int = 64) -> tuple[float, float]:
    """(mean next-token cross-entropy, next-token accuracy) over every position of the windows."""
    if len(tokens) == 0:
        return float("nan"), float("nan")
    was_training = model.training
    model.eval()
    loss, correct = torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.int64)
    for start in range(0, len(tokens), chunk):
        logits = model.lm_logits(tokens[start:start + chunk]).flatten(0, 1)
        y = targets[start:start + chunk].flatten()
        loss += F.cross_entropy(logits, y, reduction="sum").double().cpu()
        correct += (logits.argmax(-1) == y).sum().cpu()
    model.train(was_training)
    n = targets.numel()
    return float(loss) / n, float(correct) / n


def run_config(run: Run) -> RunConfig:
    """The run's :class:`~train.config.RunConfig` (unknown keys from newer minor versions are dropped)."""
    known = {f.name for f in fields(RunConfig)}
    try:
        return RunConfig(**{k: v for k, v in run.config.items() if k in known})
    except (TypeError, ProbeError) as exc:
        raise ProbeError(f"{run.path}: its stored config cannot rebuild the run ({exc})") from None


def load_task(run: Run):
    """The run's task, rebuilt from its stored configuration (the data are a function of it)."""
    from .tasks import make_task

    return make_task(run_config(run))


def load_model(run: Run, index: int):
    """(model at snapshot ``index`` on the CPU in eval mode, its RunConfig); torch's threads follow
    the trainer's default (one, or PROBE_THREADS)."""
    from .models import build_model
    from .trainer import set_threads

    set_threads(0)
    cfg = run_config(run)
    model = build_model(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            arr = run.read(name, index)
            if tuple(arr.shape) != tuple(p.shape):
                raise ProbeError(f"{run.path}: parameter {name} has shape {arr.shape}, the model needs "
                                 f"{tuple(p.shape)}")
            p.copy_(torch.from_numpy(np.ascontiguousarray(arr)))
    return model.eval(), cfg


def evaluate_split(model, task, split: str, full: bool = False) -> tuple[np.ndarray, float, float, np.ndarray]:
    """(sequence indices, loss, accuracy, logits) of ``model`` on ``split``: the sequences the trainer
    logs metrics on, or with ``full`` every sequence of the split."""
    idx = task.indices(split) if full else task.eval_indices(split)
    loss, acc, logits = evaluate(model, torch.as_tensor(task.tokens[idx]), torch.as_tensor(task.key_pos[idx]),
                                 torch.as_tensor(task.labels[idx]))
    return idx, loss, acc, logits.numpy()
