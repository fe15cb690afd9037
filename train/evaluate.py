"""Probe's one door into the trainer: rebuild a run's task and model from its snapshot file, and
the loss and accuracy of a model on a set of sequences — one function for the trainer and the
probes, so metrics a probe recomputes from stored weights equal the logged ones exactly."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields

import numpy as np
import torch
import torch.nn.functional as F

from probe.errors import ProbeError
from probe.format import Run

from .config import RunConfig
from .device import set_threads
from .models import build_model
from .tasks import make_task


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
    """The run's :class:`~probe_train.config.RunConfig` (unknown keys from newer minor versions are dropped)."""
    known = {f.name for f in fields(RunConfig)}
    try:
        return RunConfig(**{k: v for k, v in run.config.items() if k in known})
    except (TypeError, ProbeError) as exc:
        raise ProbeError(f"{run.path}: its stored config cannot rebuild the run ({exc})") from None


def load_task(run: Run):
    """The run's task, rebuilt from its stored configuration (the data are a function of it)."""
    return make_task(run_config(run))


def load_model(run: Run, index: int):
    """(model at snapshot ``index`` on the CPU in eval mode, its RunConfig); torch's threads follow
    the trainer's default (one, or PROBE_THREADS)."""
    set_threads(0)
    cfg = run_config(run)
    model = build_model(cfg)
    with torch.no_grad():
        for name, p in _checked_params(run, model).items():
            p.copy_(torch.from_numpy(np.ascontiguousarray(run.read(name, index))))
    return model.eval(), cfg


def _checked_params(run: Run, model) -> dict:
    """The model's parameters by name, each checked against the shape the run stores for it."""
    params = dict(model.named_parameters())
    for name, p in params.items():
        shape = tuple(run.tensor(name).shape[1:])
        if shape != tuple(p.shape):
            raise ProbeError(f"{run.path}: parameter {name} has shape {shape}, the model needs {tuple(p.shape)}")
    return params


def map_models(run: Run, indices, fn, *, threads: int = 1, block_bytes: int = 1 << 28, progress=None,
               check=None) -> list:
    """``[fn(index, model) for index in indices]``: the run's model at each snapshot index.

    A trajectory pays for one model per worker, not one per snapshot: each worker builds the model
    once and overwrites its parameters in place (``fn`` must not keep the model), and each tensor is
    read for a block of snapshots in one HDF5 call (at most ``block_bytes`` of weights at a time).
    ``threads`` workers evaluate snapshots at once, each on one torch thread (torch releases the GIL
    in its kernels): on 2 cores that scales where two intra-op threads on one small model do not.
    ``progress`` is called once per snapshot done. ``check(name, indices, stack)`` sees each block of
    weights as read (``stack[k]``: tensor ``name`` at snapshot ``indices[k]``), before any model uses it."""
    cfg = run_config(run)
    indices = [int(i) for i in indices]
    workers = max(1, min(threads, len(indices)))
    set_threads(1 if workers > 1 else 0)     # 0: the trainer's default (one, or PROBE_THREADS)
    models = [build_model(cfg).eval() for _ in range(workers)]
    params = [_checked_params(run, m) for m in models]
    per_snapshot = sum(p.numel() * 4 for p in params[0].values())
    block = max(workers, block_bytes // max(per_snapshot, 1))
    stop = threading.Event()   # set when this call ends early (a stop signal, an error): the workers quit

    def job(w: int, part: list[int], stacks: dict, ks: range) -> list:
        out = []
        for k in ks:
            if stop.is_set():
                break
            with torch.no_grad():
                for name, p in params[w].items():
                    p.copy_(torch.from_numpy(np.ascontiguousarray(stacks[name][k])))
            out.append(fn(part[k], models[w]))
            if progress:
                progress(part[k])
        return out

    out = []
    pool = ThreadPoolExecutor(workers) if workers > 1 else None
    try:
        for start in range(0, len(indices), block):
            part = indices[start:start + block]
            stacks = {name: run.read_many(name, part) for name in params[0]}
            if check is not None:
                for name, stack in stacks.items():
                    check(name, part, stack)
            if pool is None:
                out += job(0, part, stacks, range(len(part)))
                continue
            # contiguous shares, so each worker walks its snapshots in order
            bounds = np.linspace(0, len(part), workers + 1).astype(int)
            futures = [pool.submit(job, w, part, stacks, range(bounds[w], bounds[w + 1])) for w in range(workers)]
            for f in futures:
                out += f.result()
    finally:
        stop.set()   # a worker's share can be many snapshots: it stops after the one it is on
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return out


def split_inputs(task, split: str, full: bool = False) -> tuple[np.ndarray, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sequence indices, tokens, key positions, labels) of ``split``: the sequences the trainer logs
    metrics on, or with ``full`` every sequence of the split. Build once, evaluate many models."""
    idx = task.indices(split) if full else task.eval_indices(split)
    return (idx, torch.as_tensor(task.tokens[idx]), torch.as_tensor(task.key_pos[idx]),
            torch.as_tensor(task.labels[idx]))


def evaluate_split(model, task, split: str | tuple, full: bool = False
                   ) -> tuple[np.ndarray, float, float, np.ndarray]:
    """(sequence indices, loss, accuracy, logits) of ``model`` on ``split`` (a split name, or the
    tuple :func:`split_inputs` returned for it)."""
    idx, tokens, key_pos, labels = split_inputs(task, split, full) if isinstance(split, str) else split
    loss, acc, logits = evaluate(model, tokens, key_pos, labels)
    return idx, loss, acc, logits.numpy()
