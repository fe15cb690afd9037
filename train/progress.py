"""The training progress bar (rich, on stderr), shared by the trainer and the seed ensembles."""
from __future__ import annotations

import sys

import torch


class Progress:
    """A rich progress bar on stderr with the running loss and the latest split accuracies.

    The loss is read back from the device only every ``every`` steps (no per-step sync on CUDA).
    """

    def __init__(self, enabled: bool, total: int, start: int, every: int = 25):
        self.enabled = enabled and sys.stderr is not None
        self.total, self.start, self.every = total, start, every
        self.desc = ""

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._p = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                               TimeRemainingColumn(), TextColumn("{task.description}"),
                               console=Console(stderr=True), transient=False)
            self._p.__enter__()
            self._task = self._p.add_task("", total=self.total, completed=self.start)
        return self

    def advance(self, done: int, loss_sum: torch.Tensor, loss_n: int) -> None:
        if self.enabled and (done % self.every == 0 or done == self.total):
            loss = f"loss {float(loss_sum) / loss_n:.3f} " if loss_n else ""
            self._p.update(self._task, completed=done, description=loss + self.desc)

    def show_metrics(self, metrics: dict) -> None:
        self.desc = " ".join(f"{s} {m['acc']:.2f}" for s, m in metrics.items())

    def __exit__(self, *exc):
        if self.enabled:
            self._p.__exit__(*exc)
