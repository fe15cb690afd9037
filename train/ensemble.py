"""Seed ensembles: runs that differ only in ``seed`` and ``gamma`` trained as one batched model.

The members' parameters are stacked along a new first axis (``torch.func.stack_module_state``) and
one forward pass computes every member's loss (``torch.func.vmap`` over ``functional_call``: PyTorch's
model-ensembling recipe). The sum of the members' losses has, for each member's slice, exactly that
member's gradient; gradient clipping is per member; AdamW is elementwise, so one optimizer over the
stacked tensors is K independent optimizers. Each member keeps its own ``Trainer`` for everything but
the update (its data stream, evaluation, snapshots, resume state and file lock), so each writes an
ordinary run file that resumes on its own, and equals the run trained alone within float tolerance
(tests/test_ensemble.py). On a GPU a d-400 model's kernels are too small to keep the device busy:
K members in one pass are K times the work per launch.
"""
from __future__ import annotations

import copy
import os
import time
import warnings
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap

from probe.errors import Interrupted, ProbeError
from probe.signals import stop_asked, stoppable

from .config import RunConfig, shape_key
from .tasks import make_task
from .progress import Progress
from .trainer import Trainer, TrainResult, lr_at

@dataclass
class EnsembleResult:
    results: list[TrainResult]      # the members that finished, in the order given
    failed: dict[str, str]          # run file -> why it stopped (a member that diverged)
    seconds: float


class _EveryPosition(nn.Module):
    """A decoder whose forward is its next-token logits at every position (functional_call calls forward)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.m = model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.m.lm_logits(tokens)


class Ensemble:
    """Trains ``len(cfgs)`` runs that differ only in ``seed`` and ``gamma`` as one batched model.

    Parameters
    ----------
    cfgs : list of RunConfig
        The members' configurations; every field but ``seed`` and ``gamma`` equal.
    outs : list of path
        Each member's run file.
    resume : bool or list of bool
        Continue the member's file (all members must be at the same step).
    overwrite, show_progress, stop_at
        As :class:`~probe_train.trainer.Trainer`.
    task : Task, optional
        The members' task, already built (default: built from the first configuration; its data depend
        on ``data_seed`` and the task's fields only).
    on_step : callable, optional
        Called with the number of steps done after each update (no host synchronisation is made for it).

    >>> Ensemble([preset("quick", seed=s) for s in range(5)], [f"s{s}.h5" for s in range(5)]).run()
    """

    def __init__(self, cfgs: list[RunConfig], outs: list, *, resume: bool | list[bool] = False,
                 overwrite: bool = False, show_progress: bool = True, stop_at: int | None = None, task=None,
                 on_step=None):
        if not cfgs or len(cfgs) != len(outs):
            raise ProbeError("an ensemble needs one run file per configuration")
        if any(shape_key(c) != shape_key(cfgs[0]) for c in cfgs):
            raise ProbeError("ensemble members may differ only in seed and gamma")
        if len({os.path.abspath(o) for o in outs}) != len(outs):
            raise ProbeError("ensemble members need a run file each")
        resume = list(resume) if isinstance(resume, (list, tuple)) else [resume] * len(cfgs)
        self.show_progress, self.on_step = show_progress, on_step
        task = make_task(cfgs[0]) if task is None else task   # one copy for every member
        self.members: list[Trainer] = []
        try:
            for cfg, out, res in zip(cfgs, outs, resume):
                self.members.append(Trainer(cfg, out, resume=res, overwrite=overwrite, show_progress=False,
                                            stop_at=stop_at, task=task, ensemble=len(cfgs),
                                            data_from=self.members[0] if self.members else None))
        except BaseException:
            self.release()
            raise
        first = self.members[0]
        self.cfg, self.device, self.lm = first.cfg, first.device, first.lm

    def release(self) -> None:
        for m in self.members:
            m.release()

    def run(self) -> EnsembleResult:
        """Train every member to its end step. Ctrl-C stops all at the next step boundary with
        :class:`~probe.errors.Interrupted`, every file resumable from its last snapshot."""
        try:
            with stoppable():
                return self._run()
        finally:
            self.release()

    # --- the batched model ---------------------------------------------------------------------------
    def _stack(self) -> None:
        """The members' parameters (resumed ones at their snapshot) as stacked leaves, and one AdamW
        over them with each member's optimizer state stacked in."""
        models = [m.model for m in self.members]
        params, buffers = stack_module_state(models)
        self.names = [n for n, _ in models[0].named_parameters()]
        self.params = {n: params[n] for n in self.names}
        self.buffers = buffers
        base = copy.deepcopy(models[0]).to("meta")   # the computation only; functional_call brings the weights
        self.base = _EveryPosition(base) if self.lm else base
        self.prefix = "m." if self.lm else ""
        cfg = self.cfg
        shapes = dict(models[0].named_parameters())
        decay = [self.params[n] for n in self.names if shapes[n].ndim >= 2 or cfg.decay == "all"]
        no_decay = [self.params[n] for n in self.names if shapes[n].ndim < 2 and cfg.decay != "all"]
        self.opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.adam_eps, fused=self.device.type == "cuda" or None)
        states = [m.optimizer_state() for m in self.members]
        for n in self.names:
            if "step" not in states[0][n]:
                continue   # a fresh run: AdamW makes its state at the first update
            self.opt.state[self.params[n]] = {
                "step": states[0][n]["step"].clone(),
                "exp_avg": torch.stack([s[n]["exp_avg"] for s in states]),
                "exp_avg_sq": torch.stack([s[n]["exp_avg_sq"] for s in states])}
            for s in states:   # the members' own copies are not needed any more
                s[n].clear()

    def _losses(self, idx: torch.Tensor) -> torch.Tensor:
        """Each member's mean loss on its own batch: idx (K, B) -> (K,)."""
        m = self.members[0]
        # the batches gathered before vmap: indexing a whole unbatched table with a batched index
        # inside it would expand the table K times
        if self.lm:
            inputs, target = (m.tokens[idx],), m.targets[idx]
        else:
            inputs, target = (m.tokens[idx], m.key_pos[idx]), m.labels[idx]

        def one(params, buffers, *args):
            p = {self.prefix + n: v for n, v in {**params, **buffers}.items()}
            *inputs, target = args
            logits = functional_call(self.base, p, tuple(inputs)).float()
            return F.cross_entropy(logits.flatten(0, -2), target.flatten())

        with torch.autocast(**m.autocast), warnings.catch_warnings():
            # CPU attention without a batching rule loops over the members: as fast as separate runs
            warnings.filterwarnings("ignore", message=".*batching rule.*")
            return vmap(one)(self.params, self.buffers, *inputs, target)

    def _clip(self) -> None:
        """clip_grad_norm_ for each member: its slices' joint norm, scaled down to grad_clip."""
        grads = [self.params[n].grad for n in self.names if self.params[n].grad is not None]
        sq = sum(g.float().pow(2).flatten(1).sum(1) for g in grads)
        coef = (self.cfg.grad_clip / (sq.sqrt() + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.view(-1, *[1] * (g.ndim - 1)).to(g.dtype))

    def batch(self, step: int) -> torch.Tensor:
        """The members' batches at ``step``, (K, B): each member's own order (Trainer.batch), as one slice
        of the members' epoch orders stacked once an epoch."""
        epoch, i = divmod(step, self.members[0].steps_per_epoch)
        if getattr(self, "_epoch", None) != epoch:
            self._orders, self._epoch = torch.stack([m.order(epoch) for m in self.members]), epoch
        b = self.cfg.batch_size
        return self._orders[:, i * b:(i + 1) * b]

    # --- snapshots -------------------------------------------------------------------------------------
    @torch.no_grad()
    def _member_state(self, k: int) -> dict[str, dict]:
        """Member k's slice: its weights copied into its own model, its optimizer state as name -> AdamW state."""
        m = self.members[k]
        for n, p in m.model.named_parameters():
            p.copy_(self.params[n][k])
        out = {}
        for n in self.names:
            st = self.opt.state.get(self.params[n], {})
            out[n] = {key: st[key][k] for key in ("exp_avg", "exp_avg_sq") if key in st}
            if "step" in st:
                out[n]["step"] = st["step"]
        return out

    @torch.no_grad()
    def _drop(self, k: int, why: str) -> None:
        """Member k stops: recorded as failed, its file closed at its last snapshot; its slice is zeroed so
        that its non-finite numbers cost nothing and the others go on."""
        self.failed[self.members[k].out] = why
        self.writers[k].close()
        self.writers[k] = None
        self.members[k].release()
        for n in self.names:
            self.params[n][k].zero_()
            for v in self.opt.state.get(self.params[n], {}).values():
                if v.ndim:
                    v[k].zero_()

    # --- the loop ----------------------------------------------------------------------------------------
    def _run(self) -> EnsembleResult:
        if stop_asked():
            raise Interrupted("Interrupted before training started; nothing was written")
        K = len(self.members)
        self.failed: dict[str, str] = {}
        self.writers = []
        starts = []
        try:
            for m in self.members:
                writer, start, offset = m.open_writer()
                self.writers.append(writer)
                starts.append((start, offset))
            if len({s for s, _ in starts}) > 1:
                raise ProbeError("ensemble members resume from different steps "
                                 f"({', '.join(str(s) for s, _ in starts)}); train them one by one")
            start, time_offset = starts[0]
            self._stack()
            return self._loop(K, start, time_offset)
        finally:
            for w in self.writers:
                if w is not None:
                    w.close()

    def _loop(self, K: int, start: int, time_offset: float) -> EnsembleResult:
        cfg, first = self.cfg, self.members[0]
        schedule = first.schedule()
        pending = [s for s in schedule if s > start]
        t0 = time.perf_counter()
        losses: list[torch.Tensor] = []   # (K,) per step, read back at snapshots only (no per-step sync)
        metrics: list[dict] = [{} for _ in range(K)]
        with Progress(self.show_progress, first.end_step, start) as bar:
            if 0 in schedule:   # a fresh member's first snapshot (all members start from one step)
                for k, m in enumerate(self.members):
                    if not m.resume:
                        metrics[k] = m.snapshot(self.writers[k], 0, 0.0, float("nan"), opt_state=self._member_state(k))
                bar.show_metrics(_spread(metrics))
            for step in range(start, first.end_step):
                if stop_asked():
                    raise self._interrupted(step)
                for group in self.opt.param_groups:
                    group["lr"] = lr_at(cfg, step)
                loss = self._losses(self.batch(step))
                self.opt.zero_grad(set_to_none=True)
                loss.sum().backward()
                if cfg.grad_clip > 0:
                    self._clip()
                self.opt.step()
                losses.append(loss.detach())
                done = step + 1
                if self.on_step is not None:
                    self.on_step(done)
                if pending and done == pending[0]:
                    pending.pop(0)
                    elapsed = time_offset + time.perf_counter() - t0
                    log = torch.stack(losses).double().cpu().numpy()   # (steps since the last snapshot, K)
                    losses.clear()
                    self._snapshot_all(done, elapsed, log, metrics)
                    bar.show_metrics(_spread([m for k, m in enumerate(metrics) if self.writers[k] is not None]))
                bar.advance(done, torch.zeros(()), 0)
        seconds = time.perf_counter() - t0
        results = [TrainResult(m.out, m.end_step, len(schedule), seconds, metrics[k])
                   for k, m in enumerate(self.members) if m.out not in self.failed]
        return EnsembleResult(results, self.failed, seconds)

    def _snapshot_all(self, done: int, elapsed: float, log: np.ndarray, metrics: list[dict]) -> None:
        for k, m in enumerate(self.members):
            if self.writers[k] is None:
                continue
            bad = np.flatnonzero(~np.isfinite(log[:, k]))
            if len(bad):
                self._drop(k, f"diverged: non-finite loss at step {done - len(log) + int(bad[0]) + 1}; "
                              f"its file ends at its last snapshot")
                continue
            metrics[k] = m.snapshot(self.writers[k], done, elapsed, float(log[:, k].mean()), log[:, k],
                                    opt_state=self._member_state(k))

    def _interrupted(self, step: int) -> Interrupted:
        lasts = {int(w.last("step")) for w in self.writers if w is not None and w.last("step") is not None}
        where = f"they continue from step {min(lasts)}" if lasts else "they start again"
        files = " ".join(m.out for k, m in enumerate(self.members) if self.writers[k] is not None)
        return Interrupted(f"Interrupted at step {step}; resume each run with probe-train --resume --out FILE "
                           f"({where}): {files}")


def _spread(metrics: list[dict]) -> dict:
    """The members' split accuracies as one progress line's metrics: the lowest of each split."""
    metrics = [m for m in metrics if m]
    if not metrics:
        return {}
    return {s: {"acc": min(m[s]["acc"] for m in metrics)} for s in metrics[0]}
