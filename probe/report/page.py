"""The page model: :class:`Report` runs each probe on each source at the picked steps (cached, so a
watch computes only new steps) and gathers its numbers, notes and figures into sections; and the page as
HTML: data for the templates in ``templates/`` (autoescaped: everything from a run is plain text in these
dicts, escaped in exactly one place)."""
from __future__ import annotations

import functools
import json
import os
import re
import time
from typing import Callable

import jinja2
import numpy as np
from markupsafe import Markup

from .. import registry
from ..limits import parse_size
from ..chart.panel import extent, family, plain_number
from ..printable import markup_text
from ..readers.source import Unreadable
from ..errors import ProbeError, captured, failure, unknown
from . import MAX_STEPS, SLIDER_MAX, charts
from .sources import PENDING, Budget, Section, RunSource, open_run, pick_steps

REFRESH_S = 3
HEADLINE_FIELDS = ("kind", "snapshots", "task", "model", "gamma", "layers", "d_model", "heads", "steps", "lr",
                   "batch_size", "seed", "data_seed")   # one run: what defines it, the rest behind the toggle


class Report:
    """The page for ``specs``; :meth:`refresh` re-reads the runs, :meth:`html` computes what is new."""

    def __init__(self, specs: list[str], probes: list[str] | None = None, max_steps: int = MAX_STEPS,
                 revisions: str | None = None, progress: Callable[[str], None] | None = None,
                 allow_nonfinite: bool = False, slider_steps: int = SLIDER_MAX, max_memory=None):
        if not specs:
            raise ProbeError("give at least one run")
        known = registry.names("report")
        self.probes = list(dict.fromkeys(probes or known))
        for p in self.probes:
            if p not in known:
                raise unknown("probe", p, known)
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ProbeError(f"bad --max-steps {max_steps}: need a whole number >= 1")
        if not isinstance(slider_steps, int) or slider_steps < 0:
            raise ProbeError(f"bad --slider-steps {slider_steps}: need a whole number >= 0 (0: every snapshot)")
        self.specs, self.max_steps, self.revisions = list(specs), max_steps, revisions
        self.slider_steps = slider_steps
        self.allow_nonfinite = allow_nonfinite   # each probe's own rule (probe.api), its warning in the notes
        if max_memory is not None:
            parse_size(max_memory)               # a bad size: one error now, not one per section
        self.max_memory = max_memory             # each probe's (a section says what it refused)
        self.progress = progress or (lambda msg: None)
        self._cache: dict = {}          # (path, probe, step) -> (Result | None, note, warnings)
        self._figs: dict = {}           # (path, probe, step) -> the step's chart (SVG) or None (no figure)
        self.pending = False            # the last html() left work for later (its budget ran out)
        self.sources: list[RunSource] = []
        self.errors: dict[str, str] = {}
        self.failed: dict[tuple[str, str], str] = {}   # (path, probe) -> what a probe that raised said
        self.unreadable: dict[tuple[str, int], str] = {}   # (path, step) -> why its checkpoint cannot be read

    def refresh(self) -> tuple:
        """Re-read every run's header; returns a signature that changes when a run gains a step."""
        self.sources, self.errors = [], {}
        for spec in self.specs:
            try:
                self.sources.append(open_run(spec, self.revisions))
            except ProbeError as exc:
                self.errors[spec] = str(exc)
        return tuple((s.path, tuple(s.steps)) for s in self.sources) + tuple(sorted(self.errors.items()))

    def failures(self) -> list[str]:
        """``RUN: PROBE failed: WHAT`` per section whose probe raised (a bug of the probe, not a run it does
        not apply to), in the page's order."""
        return [f"{s.label}: {p} failed: {self.failed[(s.path, p)]}" for s in self.sources for p in self.probes
                if (s.path, p) in self.failed]

    def left_out(self) -> list[str]:
        """``RUN: step S left out: WHY`` per checkpoint of a series that cannot be read (a truncated file):
        the page shows the other steps, as ``--skip-damaged`` a table, and says so."""
        labels = {s.path: s.label for s in self.sources}
        return [f"{labels.get(p, p)}: step {s} left out: {why}" for (p, s), why in self.unreadable.items()]

    @property
    def done(self) -> bool:
        return bool(self.sources) and not self.errors and all(s.done for s in self.sources)

    def _call(self, src: RunSource, probe: str, steps: list[int], budget: Budget | None = None) -> dict:
        """Results of ``probe`` at ``steps`` (cached) as step -> (Result | None, figure, note, warnings);
        a step whose call failed has the error as note. With a ``budget``, work it does not allow is
        left out (the step is missing, or its figure is :data:`PENDING`) and ``self.pending`` set."""
        from .. import api

        todo = [s for s in steps if (src.path, probe, s) not in self._cache]
        if todo and budget is not None and not budget.allows():
            self.pending, todo = True, []
        if todo:
            spec = registry.get(probe)
            fn = api.probe_function(probe)
            kwargs = {"allow_nonfinite": self.allow_nonfinite, "max_memory": self.max_memory,
                      **dict(spec.report_options)}
            if self._tokens(src, probe):
                kwargs["tokens"] = self._tokens(src, probe)
            if src.kind == "snapshot":
                calls = [(src.path, ",".join(map(str, todo)) if spec.whole_run is None else spec.whole_run, todo)]
            else:
                calls = [(src.checkpoints[s], "latest", [s]) for s in todo]
            for path, spec_steps, wanted in calls:
                # the probe gets what it declares of these (a plugin need not take max_memory)
                results, error, notes = captured(lambda: registry.call(fn, path, step=spec_steps, **kwargs))
                note = None if error is None else failure(error)
                if isinstance(error, Unreadable) and src.kind == "checkpoints":
                    self.unreadable.setdefault((src.path, wanted[0]), note)
                    note = f"step {wanted[0]} left out: {note}"
                if error is not None and not isinstance(error, ProbeError):
                    # a bug, not a run it does not apply to (a ProbeError: a missing group, a refused size)
                    self.failed.setdefault((src.path, probe), " ".join(note.split()))
                if spec.whole_run is not None and results:
                    results[0].step = wanted[0]
                by_step = {int(r.step): r for r in results} if src.kind == "snapshot" else \
                    ({wanted[0]: results[0]} if results else {})
                for s in wanted:
                    r = by_step.get(s)
                    self._cache[(src.path, probe, s)] = (r, None if r is not None else (note or "no result"), notes)
        got = {}
        for s in steps:
            key = (src.path, probe, s)
            if key not in self._cache:
                continue
            r, note, notes = self._cache[key]
            if r is not None and key not in self._figs:
                if budget is not None and not budget.allows():
                    self.pending = True
                    got[s] = (r, PENDING, note, notes)
                    continue
                # the probe's chart of one step (inline SVG, milliseconds), or None: the trajectory shows its numbers
                self._figs[key] = charts.step_figure(registry.get(probe), r, max(1, len(self.specs)))
            got[s] = (r, self._figs.get(key), note, notes)
        return got

    @staticmethod
    def _tokens(src: RunSource, probe: str) -> str | None:
        """The probe's own token selection where the run has it; else the run's groups (a composite
        run has no 'reasoning' group), else the first 64 token ids (a checkpoint or a recorded run
        without groups; fewer if the run or its config says the vocabulary is smaller)."""
        default = registry.default_tokens(probe)
        if default is None or probe == "theory" or all(g in src.groups for g in default.split(",")):
            return None
        if src.groups:
            return ",".join(list(src.groups)[:3])
        return f"0:{min(64, src.vocab or 64)}"

    def section(self, src: RunSource, probe: str, budget: Budget | None = None, at: str = "") -> Section:
        """``probe``'s section for ``src`` (``at``: where it stands among the sections, for the status line)."""
        spec = registry.get(probe)
        if src.kind == "checkpoints" and spec.reads != registry.WEIGHTS:
            return Section(note="needs a snapshot file written by probe-train (a checkpoint holds weights only)")
        if not src.steps:
            return Section(note="no complete snapshot yet")
        if spec.whole_run and src.kind == "snapshot":
            steps = table = [src.steps[-1]]
        else:
            table = pick_steps(src.steps, self.max_steps, src.final_step)
            # the slider and the trajectory reach every snapshot where the step's figure is cheap
            every = spec.cheap or spec.chart is None
            slider = (src.steps if self.slider_steps == 0 else pick_steps(src.steps, self.slider_steps, src.final_step)) \
                if every else ()
            steps = sorted(set(table) | set(slider))
        self.progress(f"{src.label}: {probe}{at}")
        got = self._call(src, probe, steps, budget)
        sec = Section(pending=len(got) < len(steps) or any(fig is PENDING for _, fig, _, _ in got.values()))
        for s, (r, fig, note, notes) in got.items():
            if r is not None:
                sec.results[s] = r
                if fig and fig is not PENDING:
                    sec.figures[s] = fig
            sec.warnings += [n for n in notes if n not in sec.warnings]
            if note and not sec.note:
                sec.note = note
        if sec.results:
            sec.note = None if len(sec.results) == len(got) else sec.note
        sec.table_steps = [st for st in table if st in sec.results]
        return sec

    def html(self, live: bool = False, budget: Budget | None = None) -> str:
        """The whole page (``live``: it reloads itself every few seconds, keeping scroll and sliders).
        With a ``budget`` only the work it allows is done; ``self.pending`` says whether some was left.

        In reading order: what differs between the runs' configurations, the loss and accuracy curves
        (axes shared across runs), then each probe; the token groups and the whole configuration last."""
        srcs = self.sources
        self.pending = False
        sections = [self._curves(srcs)]
        for k, probe in enumerate(self.probes, 1):
            secs = [self.section(s, probe, budget, f" ({k}/{len(self.probes)})") for s in srcs]
            sections.append(self._probe_section(probe, srcs, secs))
        sections.append(section_html("groups", "Token groups", srcs, [groups_html(s) for s in srcs]))
        page = {
            "title": self._title(), "live": live, "refresh_s": REFRESH_S,
            "status": [{"label": s.label, "step": s.steps[-1] if s.steps else "–", "final": s.final_step}
                       for s in srcs],
            "written": time.strftime("%Y-%m-%d %H:%M:%S"),
            "errors": [{"spec": spec, "error": err} for spec, err in self.errors.items()],
            "nav": ["config", "curves"] + list(self.probes) + ["groups"],
            "config": self._config(),
            "sections": sections,
        }
        return _env().get_template("report.html.j2").render(page=page)

    def _curves(self, srcs: list[RunSource]) -> dict:
        """Loss and accuracy per split, one column per run, on the same axes."""
        xlim = extent([x for s in srcs for x in s.curve_steps])
        ylims = {kind: extent([v for s in srcs for ms in s.curves.values() if kind in ms
                               for v in ms[kind] if kind != "loss" or v > 0]) for kind in ("loss", "acc")}
        cells = []
        for s in srcs:
            svg = charts.curves(s.curve_steps, s.curves, xlim, ylims, len(srcs)) if s.curves else None
            cells.append([chart_html(svg, f"{s.label}-curves.svg", "loss and accuracy per split")] if svg else
                         [note_html("no logged metrics")])
        return section_html("curves", "Loss and accuracy per split", srcs, cells)

    def _title(self) -> str:
        return "Run report: " + ", ".join(s.label for s in self.sources) if self.sources else "Run report"

    def _config(self) -> dict:
        """The fields that differ between the runs first (for one run: the ones that define it), the
        whole configuration and task behind a toggle."""
        srcs = self.sources
        keys = list(dict.fromkeys(k for s in srcs for k in s.config))
        task_keys = list(dict.fromkeys(k for s in srcs for k in s.task if not isinstance(s.task[k], (list, dict))
                                       or len(json.dumps(s.task[k])) < 200))
        rows = [("kind", [s.kind for s in srcs]),
                ("snapshots", [f"{len(s.steps)}: steps {s.steps[0]} … {s.steps[-1]}" if s.steps else "none"
                               for s in srcs])]
        rows += [(k, [s.config.get(k, "") for s in srcs]) for k in keys]
        rows += [(f"task.{k}", [s.task.get(k, "") for s in srcs]) for k in task_keys]
        shown = [(k, [v if isinstance(v, str) else json.dumps(v) for v in vals]) for k, vals in rows]
        compared = len(srcs) > 1
        head = ["field"] + [s.label for s in srcs]
        if compared:
            first = [(k, vs) for k, vs in shown if len(set(vs)) > 1]
        else:
            first = sorted(((k, vs) for k, vs in shown if k in HEADLINE_FIELDS), key=lambda r: HEADLINE_FIELDS.index(r[0]))
        return {"compared": compared, "n": len(shown),
                "first": table_html(head, [row_html([k] + vs) for k, vs in first], "config-differs") if first else None,
                "table": table_html(head, [row_html([k] + vs, diff=compared and len(set(vs)) > 1) for k, vs in shown],
                                "config")}

    def _probe_section(self, probe: str, srcs: list[RunSource], secs: list[Section]) -> dict:
        # the trajectories of all runs on the same axes: one family's panel reads across the columns
        steps_all = [st for sec in secs for st in sec.results]
        xlim = extent(steps_all)
        fams: dict[str, list] = {}
        for sec in secs:
            for r in sec.results.values():
                for k, v in r.summary().items():   # a family's values, for axes shared across runs
                    fams.setdefault(family(k), []).append(plain_number(v))
        ylims = {fam: extent(vals) for fam, vals in fams.items()}
        cells = []
        for s, sec in zip(srcs, secs):
            failed = self.failed.get((s.path, probe))
            if not sec.results:
                cells.append([note_html(PENDING, "note pending") if sec.pending else
                              note_html(f"failed: {failed}", "note error") if failed else
                              note_html(f"not applicable: {sec.note or 'no result'}", "note na")])
                continue
            parts = [note_html(PENDING, "note pending")] if sec.pending else []
            chosen = Report._tokens(s, probe)
            if chosen:
                parts.append(note_html(f"tokens: {chosen} (the run has no {registry.default_tokens(probe)} group)"))
            if failed:   # at some steps
                parts.append(note_html(f"failed: {failed}", "note error"))
            elif sec.note:
                parts.append(note_html(sec.note))
            parts += [note_html(w, "warn") for w in sec.warnings[:5]]
            parts.append(numbers_table(sec, f"{s.label}-{probe}"))
            steps = sorted(sec.results)
            traj = charts.trajectory(steps, [sec.results[st].summary() for st in steps], xlim, ylims, len(srcs))
            if traj:
                parts.append(chart_html(traj, f"{s.label}-{probe}-trajectory.svg",
                                    f"over training ({len(steps)} steps; hover a point for its value)"))
            if sec.figures:
                parts.append(slider_html(sec.figures, f"{s.label}-{probe}", sec.table_steps))
            cells.append(parts)
        sec = section_html(probe, registry.get(probe).title, srcs, cells)
        sec["compare"] = compare_table(probe, srcs, secs) if len(srcs) > 1 else None
        return sec


# --- the page: data for the templates in probe/report/templates -----------------------------------
# Everything from a run (file names, config keys and values, task fields, group names, token texts,
# tensor and metric names, error and warning messages) reaches the page as plain text in these
# dicts and is escaped in exactly one place: the templates' autoescape (after _shown_text below).

def _shown_text(value):
    """Every value a template prints, before autoescape: text from a run made valid in HTML and XML
    (undecodable bytes of a file name and control characters as \\xNN: :func:`probe.printable.markup_text`)."""
    if type(value) is str:
        # most values are plain ASCII (numbers, names, base64): skip the search for characters to spell
        return value if value.isascii() and value.isprintable() else markup_text(value)
    if isinstance(value, Markup):       # a macro's own output, already escaped
        return value
    return markup_text(str(value))


@functools.cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")),
        autoescape=True, finalize=_shown_text, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def note_html(text: str, cls: str = "note") -> dict:
    return {"kind": "note", "text": text, "cls": cls}


def section_html(anchor: str, title: str, srcs: list[RunSource], cells: list[list[dict]]) -> dict:
    """A section with a column per run; a cell is a list of parts (notes, tables, figures, a slider)."""
    return {"anchor": anchor, "title": title, "compare": None,
            "runs": [{"label": s.label, "cell": c} for s, c in zip(srcs, cells)]}


def _fmt(v) -> str:
    if v is None or (isinstance(v, (float, np.floating)) and not np.isfinite(v)):
        return "–"
    return f"{v:.4g}" if isinstance(v, (float, np.floating)) else str(v)


def row_html(cells: list, diff: bool = False) -> dict:
    return {"cells": cells, "diff": diff}


def table_html(head: list, rows: list[dict], name: str, classes: tuple = ()) -> dict:
    """A table with a copy button; ``classes``: a CSS class per column (None: none)."""
    return {"kind": "table", "head": head, "rows": rows, "name": name,
            "classes": list(classes) + [None] * (len(head) - len(classes))}


def numbers_table(sec: Section, name: str) -> dict:
    steps = sec.table_steps or sorted(sec.results)
    keys = list(dict.fromkeys(k for s in steps for k in sec.results[s].summary()))
    return table_html(["number"] + [f"step {s}" for s in steps],
                  [row_html([k] + [_fmt(sec.results[s].summary().get(k)) for s in steps]) for k in keys], name)


DIFF_FACTOR = 2.0   # the comparison highlights numbers of runs that differ by more than this factor, or in sign,
FLOOR = 0.1         # by more than this share of the largest number of their kind (by_distance[1..9]: one kind)


def _differs(vals: list, floor: float = 1e-6) -> bool:
    """Whether runs' numbers differ enough to say so: by more than ``floor``, and by a factor of
    DIFF_FACTOR or more between the largest and the smallest magnitude, or in sign."""
    nums = _finite(vals)
    if len(nums) < 2:
        return False
    lo, hi = min(nums), max(nums)
    if hi - lo <= max(floor, 1e-6):
        return False
    if lo < 0 < hi:
        return True
    small, big = sorted((abs(lo), abs(hi)))
    return big >= DIFF_FACTOR * small


def compare_table(probe: str, srcs: list[RunSource], secs: list[Section]) -> dict | None:
    finals = [sec.results[max(sec.results)] if sec.results else None for sec in secs]
    keys = list(dict.fromkeys(k for r in finals if r is not None for k in r.summary()))
    if not keys:
        return None
    head = ["at the last step"] + [f"{s.label} (step {r.step if r is not None else '–'})" for s, r in zip(srcs, finals)]
    values = {k: [r.summary().get(k) if r is not None else None for r in finals] for k in keys}
    # a kind of number (by_distance[1..9]) sets its own scale: differences under FLOOR of its largest are noise
    scale: dict[str, float] = {}
    for k, vals in values.items():
        scale[family(k)] = max([scale.get(family(k), 0.0)] + [abs(v) for v in _finite(vals)])
    body = [row_html([k] + [_fmt(v) for v in vals], diff=_differs(vals, FLOOR * scale[family(k)]))
            for k, vals in values.items()]
    return table_html(head, body, f"{probe}-compare")


def _finite(vals) -> list[float]:
    return [x for x in map(plain_number, vals) if x is not None and np.isfinite(x)]


def chart_html(svg: str, filename: str, caption: str, step: int | None = None) -> dict:
    """An inline SVG chart (its points carry hover titles) with a download link that the page's script
    fills with the chart's own markup when clicked (not a second copy of it in the page: a data: URI
    would double the page's size)."""
    # probe/chart/svg.py escaped every value from a run as it built the chart: it is safe for the template
    return {"kind": "chart", "step": step, "caption": caption, "svg": Markup(svg),
            "filename": _download_name(filename)}


def _download_name(name: str) -> str:
    """A file name for a download link: letters, digits, '.', '-' and '_' only (a browser saves it
    as given: no folders, no quotes, nothing a shell or a file system reads specially)."""
    return re.sub(r"[^\w.-]", "_", markup_text(name), flags=re.ASCII)


def slider_html(figures: dict, name: str, marked: list | None = None) -> dict:
    """One figure per step behind a slider that reaches every step; ``marked``: the steps of the numbers
    table, listed beside the slider as links. The slider starts at the last step."""
    steps = sorted(figures)
    shown = [chart_html(figures[s], f"{name}-step{s}.svg", f"step {s}", s) for s in steps]
    return {"kind": "slider", "name": name, "figures": shown,
            "marks": [{"i": steps.index(s), "step": s} for s in (marked or []) if s in figures]}


def groups_html(src: RunSource) -> list[dict]:
    if not src.groups:
        return [note_html("no token groups")]
    body = []
    for name, (ids, texts) in src.groups.items():
        shown = texts if texts is not None else [str(int(i)) for i in ids]
        more = f" … (+{len(shown) - 40})" if len(shown) > 40 else ""
        body.append(row_html([name, len(ids), " ".join(repr(t) if texts is not None else t for t in shown[:40]) + more]))
    kind = "text" if any(t is not None for _, t in src.groups.values()) else "ids"
    return [table_html(["group", "tokens", kind], body, f"{src.label}-groups", (None, None, "tokens"))]
