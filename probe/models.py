"""Rebuild a trained model from a snapshot (torch is imported here only)."""
from __future__ import annotations

from dataclasses import fields

import numpy as np

from .errors import ProbeError
from .snapshot import Run


def run_config(run: Run):
    """The run's :class:`train.config.RunConfig` (unknown keys from newer minor versions are dropped)."""
    from train.config import RunConfig

    known = {f.name for f in fields(RunConfig)}
    try:
        return RunConfig(**{k: v for k, v in run.config.items() if k in known})
    except (TypeError, ProbeError) as exc:
        raise ProbeError(f"{run.path}: its stored config cannot rebuild the run ({exc})") from None


def load_model(run: Run, index: int):
    """The model at snapshot ``index``, on the CPU, in eval mode."""
    import torch

    from train.models import build_model

    cfg = run_config(run)
    model = build_model(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            arr = run.read(name, index)
            if tuple(arr.shape) != tuple(p.shape):
                raise ProbeError(f"{run.path}: parameter {name} has shape {arr.shape}, the model needs {tuple(p.shape)}")
            p.copy_(torch.from_numpy(np.ascontiguousarray(arr)))
    return model.eval(), cfg
