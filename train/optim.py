"""AdamW, the same float operations as ``torch.optim.AdamW``'s default path on the CPU (decoupled weight
decay, bias correction, no amsgrad), in 40 lines.

Why not torch's own: every ``torch.optim`` optimizer imports ``torch._dynamo`` on its first call
(its methods are wrapped to disable compilation), 1.8 s of start-up for each ``probe-train``
process on this machine — more than a whole tiny run, and paid by every run of a sweep. The
trainer compiles nothing. ``tests/test_models.py`` checks the parameters equal torch's bit for bit.
The interface is the part the trainer uses: ``param_groups`` (dicts with ``params``, ``lr``,
``weight_decay``), ``state`` (param -> ``step``, ``exp_avg``, ``exp_avg_sq``), ``zero_grad`` and
``step``.
"""
from __future__ import annotations

import torch


class AdamW:
    def __init__(self, groups, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01):
        if isinstance(groups, torch.Tensor) or not isinstance(groups, (list, tuple)):
            groups = list(groups)
        if groups and not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        self.param_groups = [{**defaults, **g, "params": list(g["params"])} for g in groups]
        self.state: dict[torch.Tensor, dict] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for g in self.param_groups:
            for p in g["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        for g in self.param_groups:
            lr, (beta1, beta2), eps, wd = g["lr"], g["betas"], g["eps"], g["weight_decay"]
            for p in g["params"]:
                if p.grad is None:
                    continue
                st = self.state.get(p)
                if not st:
                    st = self.state[p] = {"step": torch.tensor(0.0, dtype=torch.float32),
                                          "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                                          "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}
                grad, exp_avg, exp_avg_sq = p.grad, st["exp_avg"], st["exp_avg_sq"]
                st["step"] += 1
                if wd != 0:
                    p.mul_(1 - lr * wd)
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step = st["step"].item()
                bias_correction1 = 1 - beta1 ** step
                bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
                denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
                p.addcdiv_(exp_avg, denom, value=-(lr / bias_correction1))


def adamw(groups, lr: float, betas: tuple[float, float], device: torch.device):
    """The trainer's AdamW for ``device``: on CUDA torch's fused implementation (one kernel for every
    parameter: the fast path there, and its import of ``torch._dynamo`` is small beside a GPU run's
    start-up), elsewhere :class:`AdamW` (torch's CPU arithmetic without that import; bench/RESULTS.md,
    "Optimizer start-up"). ``PROBE_TORCH_ADAMW=1`` takes torch's fused AdamW on any device (torch >=
    2.4 has it on the CPU too): to compare the two, and to test the CUDA path's state handling on a
    machine without a GPU."""
    import os

    if device.type == "cuda" or os.environ.get("PROBE_TORCH_ADAMW") == "1":
        return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=True)
    return AdamW(groups, lr=lr, betas=betas)


def step_device(opt, param: torch.Tensor) -> torch.device:
    """Where ``opt`` keeps a parameter's step count: beside the parameter for a fused optimizer (its
    kernels read it there), else on the CPU (torch's default path and :class:`AdamW`)."""
    fused = getattr(opt, "defaults", {}).get("fused")
    return param.device if fused else torch.device("cpu")
