"""The papers' tasks: data, splits, token groups and P^s, one module per task.

``make_task(cfg)`` builds the task ``cfg.task`` names; a new task is a module with a
:class:`~.base.Task` subclass and a ``make_*`` function, listed in ``TASKS``.
"""
from __future__ import annotations

from importlib import import_module

from ..config import RunConfig
from .base import Task

# cfg.task -> (module, builder); modules load on first use (the lm task needs a tokenizer)
TASKS = {
    "anchor": ("anchor", "make_anchor_task"),
    "composite": ("composite", "make_composite_task"),
    "lm": ("lm", "make_text_task"),
}


def make_task(cfg: RunConfig) -> Task:
    module, builder = TASKS[cfg.task]
    return getattr(import_module(f".{module}", __name__), builder)(cfg)


__all__ = ["TASKS", "Task", "make_task"]
