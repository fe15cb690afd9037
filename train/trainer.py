"""The training loop: AdamW, warm-up + cosine, last-position loss, SWMR snapshots, resume."""
from __future__ import annotations

import math
import os
import platform
import time
from dataclasses import dataclass

import h5py
import numpy as np
import torch
import torch.nn.functional as F

from probe.files import OutputLock
from probe.errors import Interrupted, ProbeError, param
from probe.format import Run, Writer
from probe.format.run import resumable_step
from probe.format.writer import WriteFailed
from probe.signals import stop_asked, stoppable

from .config import RunConfig, shape_key, snapshot_steps
from .device import device_name, pick_device, set_threads, source_commit
from .evaluate import evaluate, evaluate_lm
from .models import build_model
from .progress import Progress
from .tasks import make_task


def _killed_in_first_snapshot(path: str) -> bool:
    """True for a run whose writer was killed before it finished its first resume state (so it holds
    at most the step-0 snapshot, which a fresh start rewrites identically)."""
    with Run(path) as run:
        return run.n_snapshots <= 1 and int(run.steps[-1] if run.n_snapshots else 0) == 0 \
            and resumable_step(run) is None


def lr_at(cfg: RunConfig, step: int) -> float:
    """Learning rate of the update at ``step`` (0-based): a linear warm-up to ``lr`` over
    ``warmup_steps`` — from ``warmup_from`` at step 0, or with ``warmup_from`` 0 from lr / warmup_steps
    (a zero first step would be wasted) — then a cosine down to the floor (``min_lr``, or
    ``min_lr_ratio`` x lr) at the last step."""
    if step < cfg.warmup_steps:
        if cfg.warmup_from > 0:
            return cfg.warmup_from + (cfg.lr - cfg.warmup_from) * step / cfg.warmup_steps
        return cfg.lr * (step + 1) / cfg.warmup_steps
    span = max(1, cfg.steps - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    floor = cfg.min_lr if cfg.min_lr > 0 else cfg.lr * cfg.min_lr_ratio
    return floor + 0.5 * (cfg.lr - floor) * (1 + math.cos(math.pi * progress))


@dataclass
class TrainResult:
    path: str
    steps: int
    snapshots: int
    seconds: float
    metrics: dict          # split -> {"loss", "acc"} at the last snapshot


class Trainer:
    """Trains one run and writes its snapshot file.

    >>> Trainer(preset("quick", gamma=0.8), "run.h5").run()
    """

    def __init__(self, cfg: RunConfig, out: str | os.PathLike | None, *, resume: bool = False,
                 overwrite: bool = False, show_progress: bool = True, snapshots: bool = True,
                 on_snapshot=None, on_metrics=None, stop_at: int | None = None, task=None, ensemble: int = 1,
                 data_from: "Trainer | None" = None):
        self.cfg = cfg
        # --stop-at: train the configured schedule (warm-up and cosine over cfg.steps) but stop after this
        # many steps, at a snapshot, resumable to the end; None: to cfg.steps
        if stop_at is not None and not 0 < stop_at:
            raise ProbeError(f"{param('stop_at', stop_at)}: need a positive step")
        self.stop_at = stop_at if stop_at is not None and stop_at < cfg.steps else None
        self.ensemble = ensemble            # members trained with this one as one batched model (.ensemble)
        self.task = task                    # None: built from cfg (an ensemble's members share one)
        self.on_snapshot = on_snapshot      # called with the step after each snapshot is complete
        # then with (step, split metrics, mean train loss, the batch losses of the updates since the last
        # snapshot or None): probe-train --tensorboard
        self.on_metrics = on_metrics
        if out is None and snapshots:
            raise ProbeError("a trainer that writes snapshots needs its run file (out)")
        self.out = None if out is None else os.fspath(out)   # None: no file at all (probe-train coord-check)
        self.resume = resume
        self.show_progress = show_progress   # the progress bar on stderr
        self.snapshots = snapshots
        # seconds spent creating the run file and writing snapshots (evaluation included): a preset's
        # measured speed (probe_train.speeds) is the rest of the time over the steps
        self.spent = {"create": 0.0, "snapshot": 0.0}
        parent = os.path.dirname(os.path.abspath(self.out)) if self.out is not None else None
        if parent is not None and not os.path.isdir(parent):
            raise ProbeError(f"cannot write {self.out}: directory {parent} does not exist")
        # One writer per run file, from before the checks below (another trainer may be creating it)
        # to the end of run(): a second trainer, --overwrite and --resume included, is refused.
        self._lock = OutputLock(self.out).acquire() if snapshots else None
        try:
            self._setup(resume, overwrite, data_from)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Let other processes write the run file again (run() does this when it ends)."""
        if self._lock is not None:
            self._lock.release()

    def _setup(self, resume: bool, overwrite: bool, data_from: "Trainer | None") -> None:
        """``data_from``: a trainer of the same task whose device tensors this one reads (an ensemble's)."""
        cfg = self.cfg
        if self.out is not None:
            self._check_out(resume, overwrite)
        self.device = pick_device(cfg.device)
        set_threads(cfg.threads, self.device)
        if self.device.type == "cuda":
            # TF32 tensor cores for the float32 matmuls of an fp32 run (10 mantissa bits, float32 range and
            # accumulation): PyTorch's own advice for training on Ampere and newer; the file records it
            # (environment). Set for every run, as the flags are global: a bf16 run after an fp32 one in
            # the same process evaluates in full float32, as it would alone.
            tf32 = cfg.precision == "fp32"
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
        if self.device.type == "cpu":
            # Small init (large gamma) drives gradients and Adam's second moments into the
            # subnormal range, where x86 arithmetic is many times slower (bench/bench_denormal.py).
            torch.set_flush_denormal(True)
        if self.task is None:
            self.task = make_task(cfg)
        self.lm = cfg.task == "lm"
        if self.lm:  # the vocabulary comes from the data; stored so the model can be rebuilt
            self.cfg = cfg = cfg.replace(vocab_size=len(self.task.vocab_ids))
        gen = torch.Generator().manual_seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.model = build_model(cfg, gen).to(self.device)
        decay = [p for p in self.model.parameters() if p.ndim >= 2 or cfg.decay == "all"]
        no_decay = [p for p in self.model.parameters() if p.ndim < 2 and cfg.decay != "all"]
        self.opt = torch.optim.AdamW(   # fused on CUDA (one kernel for every parameter), elsewhere torch's choice
            [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.adam_eps, fused=self.device.type == "cuda" or None)
        dev = self.device
        t = self.task
        src = data_from
        if src is not None and src.task is t and src.device == dev and shape_key(src.cfg) == shape_key(cfg):
            # an ensemble's members read one copy of the task's tensors (read only): on a GPU each member
            # would otherwise hold its own (103 MiB of tokens for llm-gpu on the King James file)
            for name in ("tokens", "labels", "key_pos", "targets", "train_idx", "eval_idx", "probe_idx",
                         "probe_tokens", "token_probe"):
                setattr(self, name, getattr(src, name))
        else:
            self._device_tensors(cfg, t, dev)
        self.autocast = dict(device_type=dev.type, dtype=torch.bfloat16, enabled=cfg.precision == "bf16")
        self.steps_per_epoch = max(1, len(t.train_indices) // cfg.batch_size)

    def _check_out(self, resume: bool, overwrite: bool) -> None:
        """Refuse a run file that cannot be (re)written as asked."""
        if os.path.isdir(self.out):   # (neither --resume nor --overwrite can make a folder a run file)
            raise ProbeError(f"{self.out} is a folder; {param('out')} names the run file to write, e.g. "
                             f"{os.path.join(self.out, 'run.h5')}")
        if not resume and os.path.exists(self.out) and not overwrite:
            raise ProbeError(f"{self.out} exists; pass {param('resume')} to continue it or {param('overwrite')} to "
                             "replace it")
        if resume and not os.path.exists(self.out):
            raise ProbeError(f"{self.out}: no such file to resume")
        if resume and _killed_in_first_snapshot(self.out):
            # nothing but step 0, which is a function of the config: start again rather than refuse
            self.resume = False
        if self._lock is not None:   # temporary files of a writer killed while it made or resumed the file
            Writer.remove_stale(self.out)

    def _device_tensors(self, cfg: RunConfig, t, dev) -> None:
        """The task's arrays this trainer reads, as tensors on its device."""
        self.tokens = torch.as_tensor(t.tokens, device=dev)
        self.labels = torch.as_tensor(t.labels, device=dev)
        self.key_pos = torch.as_tensor(t.key_pos, device=dev)
        self.targets = torch.as_tensor(t.targets, device=dev) if self.lm else None
        self.train_idx = torch.as_tensor(t.train_indices, device=dev)
        self.eval_idx = {s: torch.as_tensor(t.eval_indices(s), device=dev) for s in t.splits}
        self.probe_idx = t.probe_indices()
        self.probe_tokens = torch.as_tensor(t.tokens[self.probe_idx], device=dev)
        self.token_probe = None
        if self.lm and cfg.token_probe > 0:
            tp = t.token_probe_indices()
            self.token_probe = (self.tokens[torch.as_tensor(tp, device=dev)], self.targets[torch.as_tensor(tp, device=dev)])

    # --- data -----------------------------------------------------------------
    def order(self, epoch: int) -> torch.Tensor:
        """The training sequences (indices into the task) in the order epoch ``epoch`` takes them, on the
        device: a function of (seed, epoch) only, so resume needs no loader state. Drawn on the CPU, so
        that a run sees the same batches on any device (one copy an epoch)."""
        g = torch.Generator().manual_seed(self.cfg.seed * 1_000_003 + epoch)
        return self.train_idx[torch.randperm(len(self.train_idx), generator=g).to(self.device)]

    def batch(self, step: int) -> torch.Tensor:
        """Indices of the batch at ``step``: its slice of its epoch's order."""
        epoch, k = divmod(step, self.steps_per_epoch)
        if getattr(self, "_order_epoch", None) != epoch:
            self._order, self._order_epoch = self.order(epoch), epoch
        b = self.cfg.batch_size
        return self._order[k * b:(k + 1) * b]

    # --- state for snapshots and resume ----------------------------------------
    def optimizer_state(self) -> dict[str, dict]:
        """Parameter name -> its AdamW state (``step``, ``exp_avg``, ``exp_avg_sq``; empty before its first update)."""
        return {n: self.opt.state.get(p, {}) for n, p in self.model.named_parameters()}

    def _resume_tensors(self, opt_state: dict[str, dict] | None = None) -> dict[str, np.ndarray]:
        """What a resume needs besides the weights: the RNG and the optimizer's state, ``opt_state``
        (name -> AdamW state: an ensemble member's slice of the stacked state) or this trainer's own."""
        # the global generator as torch.manual_seed(seed) left it: training draws from its own generators
        out = {"rng/torch_cpu": torch.Generator().manual_seed(self.cfg.seed).get_state().numpy()}
        opt_state = self.optimizer_state() if opt_state is None else opt_state
        names = {id(p): n for n, p in self.model.named_parameters()}
        for group in self.opt.param_groups:
            for p in group["params"]:
                n = names[id(p)]
                st = opt_state.get(n, {})
                for key in ("exp_avg", "exp_avg_sq"):
                    v = st.get(key)
                    out[f"optim/{n}/{key}"] = (v.detach().cpu().numpy() if v is not None
                                               else np.zeros(tuple(p.shape), np.float32))
                out[f"optim/{n}/step"] = np.asarray(float(st.get("step", 0.0)), dtype=np.float32)
        return out

    def _load_resume(self, state: dict[str, np.ndarray], params: dict[str, np.ndarray]) -> None:
        with torch.no_grad():
            for n, p in self.model.named_parameters():
                p.copy_(torch.as_tensor(params[n]))
                step = float(state[f"optim/{n}/step"])
                if step > 0:
                    self.opt.state[p] = {
                        # the fused optimizer's kernels read the step count beside the parameter
                        "step": torch.tensor(step, dtype=torch.float32,
                                             device=p.device if self.opt.defaults["fused"] else "cpu"),
                        "exp_avg": torch.as_tensor(state[f"optim/{n}/exp_avg"]).to(self.device),
                        "exp_avg_sq": torch.as_tensor(state[f"optim/{n}/exp_avg_sq"]).to(self.device),
                    }
        torch.set_rng_state(torch.as_tensor(state["rng/torch_cpu"]))

    def logits(self, idx: torch.Tensor) -> torch.Tensor:
        """The model's logits on the sequences ``idx`` (B,): (B, vocab) at the answer position of a synthetic
        task, (B, T, vocab) at every position of text."""
        with torch.autocast(**self.autocast):   # bf16 matmuls; norms and softmax in float32
            return self.model.lm_logits(self.tokens[idx]) if self.lm else self.model(self.tokens[idx], self.key_pos[idx])

    def loss(self, idx: torch.Tensor, logits: torch.Tensor | None = None) -> torch.Tensor:
        """The training loss (cross-entropy, float32) on the sequences ``idx``, of ``logits`` when given
        (this trainer's :meth:`logits` of them) else of a new forward pass."""
        logits = self.logits(idx) if logits is None else logits
        if self.lm:  # next-token loss at every position
            return F.cross_entropy(logits.float().flatten(0, 1), self.targets[idx].flatten())
        return F.cross_entropy(logits.float(), self.labels[idx])

    def update(self, loss: torch.Tensor, lr: float) -> None:
        """One optimizer step on ``loss`` at learning rate ``lr``: its gradients, clipped to ``grad_clip``."""
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.opt.step()

    @torch.no_grad()
    def token_stats(self, chunk: int = 32) -> tuple[np.ndarray, np.ndarray]:
        """(cross-entropy, predictive entropy) in nats of every token-probe position, (k, seq) each."""
        tokens, targets = self.token_probe
        was = self.model.training
        self.model.eval()
        losses, ents = [], []
        for start in range(0, len(tokens), chunk):
            logp = self.model.lm_logits(tokens[start:start + chunk]).float().log_softmax(-1)
            losses.append(-logp.gather(-1, targets[start:start + chunk, :, None])[..., 0])
            ents.append(-(logp.exp() * logp).sum(-1))
        self.model.train(was)
        return torch.cat(losses).cpu().numpy(), torch.cat(ents).cpu().numpy()

    def evaluate(self) -> dict[str, dict[str, float]]:
        """Loss and accuracy on each split's evaluation sequences."""
        out = {}
        for split, idx in self.eval_idx.items():
            if self.lm:
                loss, acc = evaluate_lm(self.model, self.tokens[idx], self.targets[idx])
            else:
                loss, acc, _ = evaluate(self.model, self.tokens[idx], self.key_pos[idx], self.labels[idx])
            out[split] = {"loss": loss, "acc": acc}
        return out

    def environment(self) -> dict:
        """What this run trains with (stored in the file; `probe info` shows it): the same config and
        seed give the same numbers with the same threads and library versions."""
        env = {"threads": torch.get_num_threads(), "device": str(self.device), "python": platform.python_version(),
               "torch": torch.__version__, "numpy": np.__version__, "h5py": h5py.__version__,
               "flush_denormal": self.device.type == "cpu", "precision": self.precision(), "ensemble": self.ensemble,
               "device_name": device_name(self.device), "commit": source_commit()}
        if self.stop_at is not None:
            env["stop_at"] = self.stop_at
        return env

    def precision(self) -> str:
        """What the matmuls computed in: ``fp32``, ``tf32`` (float32 on CUDA's TF32 tensor cores) or ``bf16``
        (autocast; norms, softmax and the loss in float32)."""
        if self.cfg.precision == "bf16":
            return "bf16"
        return "tf32" if self.device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32 else "fp32"

    def _series(self) -> tuple[dict, dict]:
        """(shape and dtype, run arrays) of what a snapshot stores besides weights and metrics: norm
        statistics and residual norms of the probe batch (decoders), per-token losses (token probe)."""
        cfg, shapes, arrays = self.cfg, {}, {}
        if hasattr(self.model, "norms"):
            sites = list(self.model.norms())
            shapes.update(norm_ms=((len(sites),), "f8"), norm_ms_median=((len(sites),), "f8"),
                          hidden_norm=((cfg.layers + 1, len(self.probe_idx), cfg.seq_len), "f4"))
            arrays["norm_sites"] = np.asarray(sites, dtype=object)
        if self.token_probe is not None:
            k = (len(self.token_probe[0]), cfg.seq_len)
            shapes.update(token_loss=(k, "f4"), token_entropy=(k, "f4"))
        return shapes, arrays

    def _create_writer(self) -> Writer:
        t, cfg = self.task, self.cfg
        p_idx = self.probe_idx
        params = {n: tuple(p.shape) for n, p in self.model.named_parameters()}
        resume = {k: (v.shape, v.dtype) for k, v in self._resume_tensors().items()}
        series, extra_arrays = self._series()
        decoder = cfg.model != "emb-mlp"
        dims = {"vocab": cfg.vocab_size, "d_model": cfg.d_model, "seq": cfg.seq_len, "probe": len(p_idx),
                "layers": cfg.layers if decoder else 0, "heads": cfg.heads, "kv_heads": cfg.n_kv_heads,
                "d_head": cfg.head_dim, "d_hidden": cfg.d_model if decoder else cfg.d_ff,
                "d_ff": cfg.d_ff, "blocks": cfg.layers + 1 if decoder else 0,
                "sites": len(extra_arrays.get("norm_sites", ())),
                "token_probe": 0 if self.token_probe is None else len(self.token_probe[0])}
        return Writer.create(
            self.out,
            config=cfg.to_dict(),
            task=t.describe(),
            dims=dims,
            groups=t.groups,
            run_arrays={
                **t.run_arrays(),
                **extra_arrays,
                "probe_tokens": t.tokens[p_idx], "probe_labels": t.labels[p_idx],
                "probe_split": t.split[p_idx], "probe_key_pos": t.key_pos[p_idx],
            },
            params=params,
            roles=self.model.roles(),
            attention_shape=self.model.attention_shape(len(p_idx)),
            resume_tensors=resume,
            environment=self.environment(),
            series=series,
        )

    def snapshot(self, writer: Writer, step: int, elapsed: float, train_loss: float,
                 step_losses: np.ndarray | None = None, opt_state: dict[str, dict] | None = None) -> dict:
        """Evaluate, append a snapshot at ``step`` and its resume state (``opt_state``: see _resume_tensors);
        the split metrics."""
        t0 = time.perf_counter()
        metrics = self.evaluate()
        extra = {}
        if hasattr(self.model, "inspect"):
            was = self.model.training
            self.model.eval()
            seen = self.model.inspect(self.probe_tokens)
            self.model.train(was)
            attn = seen["attention"]
            extra = {k: seen[k].cpu().numpy() for k in ("norm_ms", "norm_ms_median", "hidden_norm")}
        else:
            attn = self.model.attention_maps(self.probe_tokens)
        if self.token_probe is not None:
            extra["token_loss"], extra["token_entropy"] = self.token_stats()
        writer.append(
            step=step,
            epoch=step * self.cfg.batch_size / len(self.task.train_indices),
            time=elapsed,
            train_loss=train_loss,
            params={n: p.detach().cpu().numpy() for n, p in self.model.named_parameters()},
            metrics=metrics,
            attention=None if attn is None else attn.cpu().numpy(),
            extra=extra,
            step_losses=step_losses,
        )
        writer.save_resume(step, self._resume_tensors(opt_state))
        self.spent["snapshot"] += time.perf_counter() - t0
        if self.on_snapshot is not None:
            self.on_snapshot(step)
        if self.on_metrics is not None:
            self.on_metrics(step, metrics, train_loss, step_losses)
        return metrics

    # --- the loop ----------------------------------------------------------------
    def run(self) -> TrainResult:
        """Train to ``cfg.steps``. Ctrl-C stops at the next step boundary (a snapshot being written is
        finished first) with :class:`~probe.errors.Interrupted`; the file then resumes from its last
        snapshot."""
        try:
            with stoppable():
                return self._run()
        except WriteFailed as exc:
            if exc.snapshots is None:   # creating or copying the file: nothing to resume from it
                raise
            raise ProbeError(f"{exc}; resume with probe-train --resume --out {self.out}") from None
        finally:
            self.release()

    def _interrupted(self, step: int, writer) -> Interrupted:
        if writer is None:
            return Interrupted(f"Interrupted before training started; nothing was written to {self.out}")
        last = writer.last("step")
        where = f"it continues from step {int(last)}, its last snapshot" if last is not None else "it starts again"
        return Interrupted(f"Interrupted at step {step}; resume with probe-train --resume --out {self.out} ({where})")

    def schedule(self) -> list[int]:
        """The snapshot steps this call writes: the configured ones up to the last step trained, and that
        step (--stop-at between two snapshots)."""
        if not self.snapshots:
            return []
        end = self.end_step
        return sorted({s for s in snapshot_steps(self.cfg) if s <= end} | {end})

    @property
    def end_step(self) -> int:
        """The step training stops after: ``cfg.steps``, or ``stop_at`` before it."""
        return self.cfg.steps if self.stop_at is None else self.stop_at

    def open_writer(self) -> tuple[Writer | None, int, float]:
        """(the writer, the step training starts from, the training time already in the file): a new
        file, or the resumed one with the model and optimizer at its last snapshot."""
        if not self.snapshots:
            return None, 0, 0.0
        if not self.resume:
            t0 = time.perf_counter()
            writer = self._create_writer()
            self.spent["create"] += time.perf_counter() - t0
            return writer, 0, 0.0
        writer, start, state, params = Writer.resume(self.out, config=self.cfg.to_dict(), environment=self.environment())
        self._load_resume(state, params)
        return writer, start, float(writer.last("time"))

    def _run(self) -> TrainResult:
        cfg = self.cfg
        if stop_asked():   # Ctrl-C while torch loaded or the task was built
            raise self._interrupted(0, None)
        schedule = self.schedule()
        writer, start, time_offset = self.open_writer()
        pending = [s for s in schedule if s > start]
        metrics: dict = {}
        t0 = time.perf_counter()
        loss_sum = torch.zeros((), device=self.device)
        loss_n = 0
        step_losses: list[torch.Tensor] = []   # read back at snapshots only (no per-step sync)
        try:
            with Progress(self.show_progress, self.end_step, start) as bar:
                if writer is not None and not self.resume and 0 in schedule:
                    metrics = self.snapshot(writer, 0, 0.0, float("nan"))
                    bar.show_metrics(metrics)
                self.model.train()
                for step in range(start, self.end_step):
                    if stop_asked():   # the safe point: between steps, after any snapshot
                        raise self._interrupted(step, writer)
                    loss = self.loss(self.batch(step))
                    self.update(loss, lr_at(cfg, step))
                    loss_sum += loss.detach()
                    loss_n += 1
                    if writer is not None:
                        step_losses.append(loss.detach())
                    done = step + 1
                    if pending and done == pending[0]:
                        pending.pop(0)
                        elapsed = time_offset + time.perf_counter() - t0
                        log = torch.stack(step_losses).double().cpu().numpy()
                        step_losses.clear()
                        metrics = self.snapshot(writer, done, elapsed, float(loss_sum) / loss_n, log)
                        loss_sum.zero_()
                        loss_n = 0
                        bar.show_metrics(metrics)
                    # on a GPU the loss is read back at snapshots only: no host synchronisation between them
                    bar.advance(done, loss_sum, loss_n if self.device.type == "cpu" else 0)
        finally:
            if writer is not None:
                writer.close()
        if not metrics:
            metrics = self.evaluate()
        return TrainResult(self.out, self.end_step, len(schedule), time.perf_counter() - t0, metrics)
