"""What the commands of probe-train share: Click's settings, the --preset option's help and check, and
the progress bar of a command's long work (sweep, coord-check)."""
from __future__ import annotations

import sys

from probe.errors import terminal, unknown

from .config import PRESETS

CONTEXT = {"help_option_names": ["--help"], "max_content_width": 100}   # probe's (probe/cli)

PRESET_HELP = (f"starting configuration: {', '.join(PRESETS)} (probe-train presets says what each is for; "
               "--print-config shows its values)")


def known_preset(_ctx, _param, value: str) -> str:
    """--preset's check as it is parsed: a mistyped name is the error, before a missing --out."""
    if value not in PRESETS:
        raise unknown("preset", value, PRESETS)
    return value


class StderrBar:
    """A rich progress bar labelled ``label`` on stderr while it is a terminal (``shown``), else nothing:
    ``update(completed, total, description)`` moves it, ``log(msg)`` prints a message above it (or plainly
    on stderr without one)."""

    def __init__(self, label: str):
        self.label = label
        self.shown = sys.stderr.isatty()

    def __enter__(self) -> "StderrBar":
        if self.shown:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._p = Progress(TextColumn(f"[bold]{self.label}"), BarColumn(), MofNCompleteColumn(),
                               TextColumn("{task.description}"), TimeElapsedColumn(), console=Console(stderr=True))
            self._p.__enter__()
            self._task = self._p.add_task("", total=None)
        return self

    def update(self, completed: int, total: int, description: str = "") -> None:
        if self.shown:
            self._p.update(self._task, completed=completed, total=total, description=description)

    def log(self, msg: str) -> None:
        if self.shown:   # printed as it is: no markup, no highlighting, no :emoji: codes, no control characters
            self._p.console.print(terminal(msg), markup=False, highlight=False, emoji=False)
        else:
            print(terminal(msg), file=sys.stderr, flush=True)

    def __exit__(self, *exc) -> None:
        if self.shown:
            self._p.__exit__(*exc)
