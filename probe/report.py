"""A run report: one self-contained HTML page per run, or per set of runs side by side.

The page holds the run's configuration and task, its loss and accuracy curves per split, its
token groups (with their text for language runs), and for every probe that applies its
headline numbers at a few steps spread over training, their trajectory, and its figure at
each of those steps behind a step slider. Figures are inline PNG (downloadable), tables are
plain HTML (copyable as TSV), the CSS and JavaScript are inline: the file opens offline.

A source is a snapshot file, a checkpoint folder or a folder of them (``checkpoint-500/``,
``step_1000``: weight probes only), or a hub model ``hf:ORG/NAME`` with ``revisions``.

:class:`Report` keeps what it computed, so :func:`watch` — which rewrites the page atomically
whenever a run gains a snapshot and lets the page reload itself — computes only new steps.
"""
from __future__ import annotations

import base64
import io
import json
import os
import re
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ._files import open_regular
from ._proc import normal_priority
from ._text import markup_text
from .errors import ProbeError, ProbeWarning

# the probes a report runs, in page order; a probe that does not apply says why
PROBES = ("similarity", "pca", "align", "condense", "theory", "ood", "attention", "bias", "spectrum", "rank",
          "norms", "sinks", "dynamics", "rank_trajectory")
WEIGHT_PROBES = ("similarity", "pca", "align", "condense", "spectrum", "rank")   # any checkpoint
WHOLE_RUN = {"dynamics": "latest", "rank_trajectory": "all"}                      # one result for the run
TITLES = {"similarity": "Cosine similarity of token embeddings", "pca": "PCA of token embeddings",
          "align": "Singular vectors of W_V against the embeddings", "condense": "Covariance eigenvalues",
          "theory": "Theory: P^s reconstruction of the embedding", "ood": "Accuracy per split and held-out combination",
          "attention": "Attention against causal averaging", "bias": "Reasoning bias ΔL",
          "spectrum": "Weight spectra (power-law alpha)", "rank": "Effective rank of weights",
          "norms": "Norm saturation (ε share)", "sinks": "Attention sinks", "dynamics": "Loss dynamics",
          "rank_trajectory": "Rank minima over training"}
NO_STEP_FIGURE = ("bias", "dynamics")
MAX_STEPS = 6
DPI = 80
REFRESH_S = 3


@dataclass
class Source:
    """One run as the report sees it: a snapshot file or a series of checkpoints, one per step."""

    label: str
    path: str
    kind: str                                   # "snapshot" or "checkpoints"
    steps: list[int] = field(default_factory=list)
    checkpoints: dict[int, str] = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    task: dict = field(default_factory=dict)
    curves: dict = field(default_factory=dict)  # split -> metric -> values (at curve_steps)
    curve_steps: list[int] = field(default_factory=list)
    groups: dict = field(default_factory=dict)  # name -> (ids, texts or None)
    final_step: int | None = None               # the configured last step (snapshot runs)

    @property
    def done(self) -> bool:
        return self.kind == "snapshot" and bool(self.steps) and self.final_step is not None \
            and self.steps[-1] >= self.final_step


def _label(path: str) -> str:
    base = os.path.basename(os.path.normpath(path)) if not path.startswith("hf:") else path[3:]
    return base or path


def open_source(spec: str, revisions: str | None = None) -> Source:
    """Read what the page needs of one run (cheap: no tensors); a file still being written works."""
    from .format import Run, is_snapshot_file

    if is_snapshot_file(spec):
        with Run(spec) as run:
            run.check_all()   # every probe reads the run: one error for a malformed file, not one per probe
            steps = [int(s) for s in run.steps]
            metrics = run.metrics()
            strings = run.token_strings()
            groups = {k: (v, _texts(strings, v)) for k, v in run.groups.items()}
            final = run.config.get("steps")    # the file's word: a whole number, or not known
            return Source(_label(spec), spec, "snapshot", steps, {}, dict(run.config), dict(run.task),
                          {s: {m: np.asarray(v) for m, v in ms.items()} for s, ms in metrics.items()}, steps, groups,
                          final if isinstance(final, int) and not isinstance(final, bool) else None)
    return _checkpoint_series(spec, revisions)


def _texts(strings: list[str] | None, ids) -> list[str] | None:
    """The text of each token id (None without a vocabulary; '?' for an id it does not have)."""
    if strings is None:
        return None
    return [strings[i] if 0 <= i < len(strings) else "?" for i in (int(i) for i in ids)]


def _checkpoint_series(spec: str, revisions: str | None) -> Source:
    from .batch import discover
    from .readers.checkpoints import step_from_name

    found = discover([spec], revisions)
    by_step: dict[int, str] = {}
    for i, path in enumerate(found):
        step = step_from_name(path)
        by_step.setdefault(step if step is not None else -(len(found) - i), path)   # unnamed: keep their order
    if not by_step:
        raise ProbeError(f"{spec}: no checkpoints found")
    steps = sorted(by_step)
    src = Source(_label(spec), spec, "checkpoints", steps, by_step)
    src.config = _config_of(by_step[steps[-1]])
    src.curve_steps, src.curves = _trainer_log(by_step[steps[-1]])
    return src


def _config_of(path: str) -> dict:
    from .readers.hub import is_hub, local

    folder = local(path) if is_hub(path) else path
    if not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    if not os.path.exists(os.path.join(folder, "config.json")):
        return {}
    try:
        with open_regular(os.path.join(folder, "config.json"), what="checkpoint config", encoding="utf-8") as fh:
            cfg = json.load(fh)
        return cfg if isinstance(cfg, dict) else {}
    except (OSError, ValueError):
        return {}


def _trainer_log(path: str) -> tuple[list[int], dict]:
    """Loss curves from an HF Trainer checkpoint's ``trainer_state.json`` (its ``log_history``)."""
    if path.startswith("hf:") or not os.path.isdir(path):
        return [], {}
    if not os.path.exists(os.path.join(path, "trainer_state.json")):
        return [], {}
    try:
        with open_regular(os.path.join(path, "trainer_state.json"), what="Trainer state file",
                          encoding="utf-8") as fh:
            log = json.load(fh).get("log_history", [])
    except (OSError, ValueError, AttributeError):
        return [], {}
    if not isinstance(log, list):
        return [], {}
    steps, curves = [], {}

    def number(v, kinds=(int, float)):
        return isinstance(v, kinds) and not isinstance(v, bool)

    for key, split in (("loss", "train"), ("eval_loss", "eval")):   # entries with a number at a whole step
        pts = [(e["step"], e[key]) for e in log if isinstance(e, dict) and number(e.get("step"), int)
               and number(e.get(key))]
        if pts:
            curves[split] = {"loss": np.array([v for _, v in pts], dtype=float)}
            steps = steps or [int(s) for s, _ in pts]
            if len(pts) != len(steps):   # two splits logged at different steps: keep the first only
                curves.pop(split)
    return steps, curves


def pick_steps(steps: list[int], k: int, final: int | None = None) -> list[int]:
    """At most ``k`` steps spread over training, the first and the last always among them: the
    snapshots nearest to k evenly spaced points of ``final`` (the planned last step), so that while
    a run grows the earlier picks stay put and a rebuild computes only the newest step."""
    if len(steps) <= k:
        return list(steps)
    arr = np.asarray(steps)
    end = max(final or 0, int(arr[-1]))
    targets = np.linspace(arr[0], end, k)
    picked = {int(arr[np.abs(arr - t).argmin()]) for t in targets if t <= arr[-1]}
    picked |= {int(arr[0]), int(arr[-1])}
    return sorted(picked)


def _png(draw) -> str:
    buf = io.BytesIO()
    draw(buf)
    return base64.b64encode(buf.getvalue()).decode("ascii")


@dataclass
class Section:
    """One probe on one run: its results by step, a figure per step, the trajectory, or why none."""

    results: dict = field(default_factory=dict)   # step -> Result
    figures: dict = field(default_factory=dict)   # step -> base64 PNG
    trajectory: str | None = None
    note: str | None = None
    warnings: list = field(default_factory=list)
    pending: bool = False                          # some steps or figures wait for CPU budget


class Budget:
    """A CPU budget of ``share`` of one core: work may go on while this process's CPU time (imports
    included) stays under ``share`` times the wall time since the budget began."""

    def __init__(self, share: float):
        self.share, self.wall0 = share, time.monotonic()

    def allows(self) -> bool:
        return time.process_time() <= self.share * (time.monotonic() - self.wall0)


PENDING = ("still to compute: while a run trains, the report holds to its share of the CPU "
           "(probe-train --report: 1 % of a core) and fills this in at a later update")


class Report:
    """The page for ``specs``; :meth:`refresh` re-reads the runs, :meth:`html` computes what is new."""

    def __init__(self, specs: list[str], probes: list[str] | None = None, max_steps: int = MAX_STEPS,
                 revisions: str | None = None, progress: Callable[[str], None] | None = None,
                 allow_nonfinite: bool = False):
        if not specs:
            raise ProbeError("give at least one run")
        self.probes = list(dict.fromkeys(probes or PROBES))
        for p in self.probes:
            if p not in PROBES:
                raise ProbeError(f"unknown probe '{p}' (known: {', '.join(PROBES)})")
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ProbeError(f"bad --max-steps {max_steps}: need a whole number >= 1")
        self.specs, self.max_steps, self.revisions = list(specs), max_steps, revisions
        self.allow_nonfinite = allow_nonfinite   # each probe's own rule (probe.api), its warning in the notes
        self.progress = progress or (lambda msg: None)
        self._cache: dict = {}          # (path, probe, step) -> (Result | None, note, warnings)
        self._figs: dict = {}           # (path, probe, step) -> base64 PNG or None (no figure)
        self.pending = False            # the last html() left work for later (its budget ran out)
        self.sources: list[Source] = []
        self.errors: dict[str, str] = {}

    # ------------------------------------------------------------------------------------------
    def refresh(self) -> tuple:
        """Re-read every run's header; returns a signature that changes when a run gains a step."""
        self.sources, self.errors = [], {}
        for spec in self.specs:
            try:
                self.sources.append(open_source(spec, self.revisions))
            except ProbeError as exc:
                self.errors[spec] = str(exc)
        return tuple((s.path, tuple(s.steps)) for s in self.sources) + tuple(sorted(self.errors.items()))

    @property
    def done(self) -> bool:
        return bool(self.sources) and not self.errors and all(s.done for s in self.sources)

    # ------------------------------------------------------------------------------------------
    def _call(self, src: Source, probe: str, steps: list[int], budget: Budget | None = None) -> dict:
        """Results of ``probe`` at ``steps`` (cached) as step -> (Result | None, figure, note, warnings);
        a step whose call failed has the error as note. With a ``budget``, work it does not allow is
        left out (the step is missing, or its figure is :data:`PENDING`) and ``self.pending`` set."""
        from . import api

        todo = [s for s in steps if (src.path, probe, s) not in self._cache]
        if todo and budget is not None and not budget.allows():
            self.pending, todo = True, []
        if todo:
            fn = getattr(api, probe)
            if src.kind == "snapshot":
                calls = [(src.path, ",".join(map(str, todo)) if probe not in WHOLE_RUN else WHOLE_RUN[probe], todo)]
            else:
                calls = [(src.checkpoints[s], "latest", [s]) for s in todo]
            for path, spec, wanted in calls:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", ProbeWarning)
                    try:
                        kwargs = {"step": spec, "allow_nonfinite": self.allow_nonfinite}
                        if probe == "ood":
                            kwargs["threads"] = 1
                        if self._tokens(src, probe):
                            kwargs["tokens"] = self._tokens(src, probe)
                        results = fn(path, **kwargs)
                        note = None
                    except ProbeError as exc:
                        results, note = [], str(exc)
                    except Exception as exc:   # one probe's failure must not lose the page
                        results, note = [], f"failed: {type(exc).__name__}: {exc}"
                notes = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, ProbeWarning)))
                if probe in WHOLE_RUN and results:
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
                self._figs[key] = self._figure(probe, r, src)
            got[s] = (r, self._figs.get(key), note, notes)
        return got

    @staticmethod
    def _tokens(src: Source, probe: str) -> str | None:
        """The probe's own token selection where the run has it; else the run's groups (a composite
        run has no 'reasoning' group), else the first 64 token ids (a checkpoint has no groups; fewer
        if its config says the vocabulary is smaller)."""
        from .api import DEFAULT_TOKENS

        default = DEFAULT_TOKENS.get(probe)
        if default is None:
            return None
        wanted = default.split(",")
        if all(g in src.groups for g in wanted):
            return None
        if src.groups and probe != "theory":
            return ",".join(list(src.groups)[:3])
        vocab = src.config.get("vocab_size")
        n = min(64, vocab) if isinstance(vocab, int) and vocab > 1 else 64
        return None if probe == "theory" else f"0:{n}"

    def _figure(self, probe: str, r, src: Source) -> str | None:
        from .plotting import plot_results

        if probe in NO_STEP_FIGURE:      # its numbers are the picture: the trajectory shows them
            return None
        name = {"rank_trajectory": "rank-minima"}.get(probe, probe)
        try:
            return _png(lambda buf: plot_results(name, [r], buf, f"{src.label}: {probe}", dpi=DPI))
        except ProbeError:
            return None

    def section(self, src: Source, probe: str, budget: Budget | None = None) -> Section:
        if src.kind == "checkpoints" and probe not in WEIGHT_PROBES:
            return Section(note="needs a snapshot file written by probe-train (a checkpoint holds weights only)")
        if not src.steps:
            return Section(note="no complete snapshot yet")
        steps = [src.steps[-1]] if (probe in WHOLE_RUN and src.kind == "snapshot") else \
            pick_steps(src.steps, self.max_steps, src.final_step)
        self.progress(f"{src.label}: {probe}")
        got = self._call(src, probe, steps, budget)
        sec = Section()
        if len(got) < len(steps) or any(fig is PENDING for _, fig, _, _ in got.values()):
            sec.pending = True
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
            if len(sec.results) > 1:
                steps_ = sorted(sec.results)
                keys = list(dict.fromkeys(k for st in steps_ for k in sec.results[st].summary()))
                families: dict[str, list[str]] = {}
                for k in keys:
                    families.setdefault(k.split("[")[0], []).append(k)
                panels = [(fam, {k[len(fam):].strip("[]") or fam:
                                 (steps_, [sec.results[st].summary().get(k) for st in steps_]) for k in ks[:8]})
                          for fam, ks in list(families.items())[:9]]
                sec.trajectory = svg_panels(panels, "step")
        return sec

    # ------------------------------------------------------------------------------------------
    def html(self, live: bool = False, budget: Budget | None = None) -> str:
        """The whole page (``live``: it reloads itself every few seconds, keeping scroll and sliders).
        With a ``budget`` only the work it allows is done; ``self.pending`` says whether some was left."""
        srcs = self.sources
        self.pending = False
        sections = []
        cells = []
        for s in srcs:
            if s.curves:
                panels = [(kind, {split: (s.curve_steps[:len(ms[kind])], list(ms[kind]))
                                  for split, ms in s.curves.items() if kind in ms})
                          for kind in ("loss", "acc") if any(kind in ms for ms in s.curves.values())]
                svg = svg_panels(panels, "step", log={"loss"}, unit={"acc"})
                cells.append([_figure(svg, f"{s.label}-curves.svg", "loss and accuracy per split", mime="svg")])
            else:
                cells.append([_note("no logged metrics")])
        sections.append(_section("curves", "Loss and accuracy per split", srcs, cells))
        sections.append(_section("groups", "Token groups", srcs, [_groups(s) for s in srcs]))
        for probe in self.probes:
            secs = [self.section(s, probe, budget) for s in srcs]
            sections.append(self._probe_section(probe, srcs, secs))
        page = {
            "title": self._title(), "live": live, "refresh_s": REFRESH_S,
            "status": [{"label": s.label, "step": s.steps[-1] if s.steps else "–", "final": s.final_step}
                       for s in srcs],
            "written": time.strftime("%Y-%m-%d %H:%M:%S"),
            "errors": [{"spec": spec, "error": err} for spec, err in self.errors.items()],
            "nav": ["config", "curves", "groups"] + list(self.probes),
            "config": {"compared": len(srcs) > 1, "table": self._config_table()},
            "sections": sections,
        }
        return _render("report.html.j2", page=page)

    def _title(self) -> str:
        return "Run report: " + ", ".join(s.label for s in self.sources) if self.sources else "Run report"

    def _config_table(self) -> dict:
        srcs = self.sources
        keys = list(dict.fromkeys(k for s in srcs for k in s.config))
        task_keys = list(dict.fromkeys(k for s in srcs for k in s.task if not isinstance(s.task[k], (list, dict))
                                       or len(json.dumps(s.task[k])) < 200))
        rows = [("kind", [s.kind for s in srcs]), ("steps", [f"{len(s.steps)} snapshots: {s.steps[:1]}…{s.steps[-1:]}"
                                                             if s.steps else "none" for s in srcs])]
        rows += [(k, [s.config.get(k, "") for s in srcs]) for k in keys]
        rows += [(f"task.{k}", [s.task.get(k, "") for s in srcs]) for k in task_keys]
        body = []
        for k, vals in rows:
            shown = [v if isinstance(v, str) else json.dumps(v) for v in vals]
            body.append(_row([k] + shown, diff=len(srcs) > 1 and len(set(shown)) > 1))
        return _table(["field"] + [s.label for s in srcs], body, "config")

    def _probe_section(self, probe: str, srcs: list[Source], secs: list[Section]) -> dict:
        cells = []
        for s, sec in zip(srcs, secs):
            if not sec.results:
                cells.append([_note(PENDING, "note pending") if sec.pending else
                              _note(f"not applicable: {sec.note or 'no result'}", "note na")])
                continue
            parts = [_note(PENDING, "note pending")] if sec.pending else []
            chosen = Report._tokens(s, probe)
            if chosen:
                parts.append(_note(f"tokens: {chosen} (the run has no {_default_tokens(probe)} group)"))
            if sec.note:
                parts.append(_note(sec.note))
            parts += [_note(w, "warn") for w in sec.warnings[:5]]
            parts.append(_numbers_table(sec, f"{s.label}-{probe}"))
            if sec.trajectory:
                parts.append(_figure(sec.trajectory, f"{s.label}-{probe}-trajectory.svg", "over training", mime="svg"))
            if sec.figures:
                parts.append(_slider(sec.figures, f"{s.label}-{probe}"))
            cells.append(parts)
        sec = _section(probe, TITLES.get(probe, probe), srcs, cells)
        sec["compare"] = _compare_table(probe, srcs, secs) if len(srcs) > 1 else None
        return sec


# --- the page: data for the templates in probe/templates ------------------------------------------
# Everything from a run (file names, config keys and values, task fields, group names, token texts,
# tensor and metric names, error and warning messages) reaches the page as plain text in these
# dicts and is escaped in exactly one place: the templates' autoescape (after _shown_text below).

_ENV = _Markup = None


def _shown_text(value):
    """Every value a template prints, before autoescape: text from a run made valid in HTML and XML
    (undecodable bytes of a file name and control characters as \\xNN: :func:`probe._text.markup_text`)."""
    if type(value) is str:
        # most values are plain ASCII (numbers, names, base64): skip the search for characters to spell
        return value if value.isascii() and value.isprintable() else markup_text(value)
    if isinstance(value, _Markup):       # a macro's own output, already escaped
        return value
    return markup_text(str(value))


def _render(template: str, **values) -> str:
    global _ENV, _Markup
    if _ENV is None:
        import jinja2
        from markupsafe import Markup as _Markup

        _ENV = jinja2.Environment(
            loader=jinja2.FileSystemLoader(os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")),
            autoescape=True, finalize=_shown_text, undefined=jinja2.StrictUndefined, trim_blocks=True,
            lstrip_blocks=True)
    return _ENV.get_template(template).render(**values)


def _default_tokens(probe: str) -> str:
    from .api import DEFAULT_TOKENS

    return str(DEFAULT_TOKENS.get(probe))


def _note(text: str, cls: str = "note") -> dict:
    return {"kind": "note", "text": text, "cls": cls}


def _section(anchor: str, title: str, srcs: list[Source], cells: list[list[dict]]) -> dict:
    """A section with a column per run; a cell is a list of parts (notes, tables, figures, a slider)."""
    return {"anchor": anchor, "title": title, "compare": None,
            "runs": [{"label": s.label, "cell": c} for s, c in zip(srcs, cells)]}


def _fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, (float, np.floating)):
        if not np.isfinite(v):
            return "–"
        return f"{v:.4g}"
    return str(v)


def _row(cells: list, diff: bool = False) -> dict:
    return {"cells": cells, "diff": diff}


def _table(head: list, rows: list[dict], name: str, classes: tuple = ()) -> dict:
    """A table with a copy button; ``classes``: a CSS class per column (None: none)."""
    return {"kind": "table", "head": head, "rows": rows, "name": name,
            "classes": list(classes) + [None] * (len(head) - len(classes))}


def _numbers_table(sec: Section, name: str) -> dict:
    steps = sorted(sec.results)
    keys = list(dict.fromkeys(k for s in steps for k in sec.results[s].summary()))
    return _table(["number"] + [f"step {s}" for s in steps],
                  [_row([k] + [_fmt(sec.results[s].summary().get(k)) for s in steps]) for k in keys], name)


def _differs(vals: list) -> bool:
    nums = [float(v) for v in vals if isinstance(v, (int, float, np.floating, np.integer)) and np.isfinite(v)]
    if len(nums) < 2:
        return False
    lo, hi = min(nums), max(nums)
    return hi - lo > 0.1 * max(abs(lo), abs(hi), 1e-12) and hi - lo > 1e-6


def _compare_table(probe: str, srcs: list[Source], secs: list[Section]) -> dict | None:
    finals = [sec.results[max(sec.results)] if sec.results else None for sec in secs]
    keys = list(dict.fromkeys(k for r in finals if r is not None for k in r.summary()))
    if not keys:
        return None
    head = ["at the last step"] + [f"{s.label} (step {r.step if r is not None else '–'})" for s, r in zip(srcs, finals)]
    body = []
    for k in keys:
        vals = [r.summary().get(k) if r is not None else None for r in finals]
        body.append(_row([k] + [_fmt(v) for v in vals], diff=_differs(vals)))
    return _table(head, body, f"{probe}-compare")


def _download_name(name: str) -> str:
    """A file name for a download link: letters, digits, '.', '-' and '_' only (a browser saves it
    as given: no folders, no quotes, nothing a shell or a file system reads specially)."""
    return re.sub(r"[^\w.-]", "_", markup_text(name), flags=re.ASCII)


def _figure(data: str, filename: str, caption: str, step: int | None = None, mime: str = "png") -> dict:
    """A figure: base64 PNG, or SVG text (``mime='svg'``), with a download link of the same bytes
    (a data: URI of base64 text: nothing in it needs escaping in a URL or an attribute)."""
    if mime == "svg":
        data = base64.b64encode(data.encode("utf-8")).decode("ascii")
    uri = f"data:image/{'svg+xml' if mime == 'svg' else 'png'};base64,{data}"
    return {"kind": "figure", "step": step, "caption": caption, "uri": uri, "filename": _download_name(filename),
            "format": mime.upper()}


_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#7f7f7f")


def svg_panels(panels: list, xlabel: str, log: set = frozenset(), unit: set = frozenset(), width: int = 300,
               height: int = 190, cols: int = 3) -> str:
    """Line charts as one SVG: ``panels`` is [(title, {label: (xs, ys)})]; a panel named in ``log``
    has a log y axis, one in ``unit`` the range [0, 1]. Drawn without matplotlib: a rebuild of a live
    page costs milliseconds per chart, and the text stays sharp at any zoom."""
    from .plotting import GROUP_COLORS

    cols = max(1, min(cols, len(panels)))
    rows = (len(panels) + cols - 1) // cols
    ml, mr, mt, mb = 46, 8, 18, 30
    out = []
    for n, (title, series) in enumerate(panels):
        ox, oy = (n % cols) * width, (n // cols) * height
        pw, ph = width - ml - mr, height - mt - mb
        pts = [(float(x), float(y)) for xs, ys in series.values() for x, y in zip(xs, ys)
               if y is not None and np.isfinite(y) and (title not in log or y > 0)]
        panel = {"title": title, "cx": ox + width / 2, "top": oy + 12, "middle": oy + height / 2, "empty": not pts}
        out.append(panel)
        if not pts:
            continue
        fy = np.log10 if title in log else (lambda v: v)
        x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
        ys = [fy(p[1]) for p in pts]
        y0, y1 = (0.0, 1.0) if title in unit else (min(ys), max(ys))
        if x1 == x0:
            x0, x1 = x0 - 1, x1 + 1
        if y1 == y0:
            y0, y1 = y0 - 0.5, y1 + 0.5

        def X(x):
            return ox + ml + (x - x0) / (x1 - x0) * pw

        def Y(y):
            return oy + mt + ph - (fy(y) - y0) / (y1 - y0) * ph

        panel["box"] = {"x": ox + ml, "y": oy + mt, "w": pw, "h": ph}
        panel["yticks"] = []
        for t in np.linspace(y0, y1, 4):
            yy = oy + mt + ph - (t - y0) / (y1 - y0) * ph
            panel["yticks"].append({"x2": ox + ml + pw, "y": f"{yy:.1f}", "lx": ox + ml - 3, "ly": f"{yy + 3:.1f}",
                                    "label": f"{10 ** t:.3g}" if title in log else f"{t:.3g}"})
        panel["xticks"] = [{"x": f"{X(t):.1f}", "y": oy + mt + ph + 12, "label": f"{t:.4g}"}
                           for t in np.linspace(x0, x1, 4)]
        panel["xlabel"] = {"x": ox + ml + pw / 2, "y": oy + height - 4, "text": xlabel}
        panel["lines"] = []
        for i, (label, (xs, ys_)) in enumerate(series.items()):
            line = [(X(float(x)), Y(float(y))) for x, y in zip(xs, ys_)
                    if y is not None and np.isfinite(y) and (title not in log or y > 0)]
            if not line:
                continue
            panel["lines"].append({
                "color": GROUP_COLORS.get(label, _PALETTE[i % len(_PALETTE)]), "label": label,
                "points": " ".join(f"{a:.1f},{b:.1f}" for a, b in line),
                "dots": [(f"{a:.1f}", f"{b:.1f}") for a, b in line] if len(line) <= 12 else [],
                "lx": ox + ml + pw - 2, "ly": oy + mt + 10 + 11 * i})
    return _render("panels.svg.j2", width=cols * width, height=rows * height, panels=out)


def _slider(figures: dict, name: str) -> dict:
    steps = sorted(figures)
    return {"kind": "slider", "name": name, "figures": [_figure(figures[s], f"{name}-step{s}.png", f"step {s}", s) for s in steps]}


def _groups(src: Source) -> list[dict]:
    if not src.groups:
        return [_note("no token groups")]
    body = []
    for name, (ids, texts) in src.groups.items():
        shown = texts if texts is not None else [str(int(i)) for i in ids]
        more = f" … (+{len(shown) - 40})" if len(shown) > 40 else ""
        body.append(_row([name, len(ids), " ".join(repr(t) if texts is not None else t for t in shown[:40]) + more]))
    kind = "text" if any(t is not None for _, t in src.groups.values()) else "ids"
    return [_table(["group", "tokens", kind], body, f"{src.label}-groups", (None, None, "tokens"))]


# --- writing --------------------------------------------------------------------------------------

def write_atomic(path: str, text: str) -> None:
    """Write the page ``text`` to ``path`` through a temporary file and a rename
    (:func:`probe._files.write_atomic`), so a reader (a browser reloading) sees the old page or the new
    one, never half of one, and a full disk leaves the old page and no temporary file."""
    from ._files import write_atomic as write

    write(path, text, "report")


def check_out(path: str) -> None:
    from ._files import writable

    if not path.endswith((".html", ".htm")):
        raise ProbeError(f"report {path}: use a .html name")
    writable(path, "report")


def report(specs: list[str], out: str, *, probes: list[str] | None = None, max_steps: int = MAX_STEPS,
           revisions: str | None = None, progress: Callable[[str], None] | None = None,
           allow_nonfinite: bool = False) -> Report:
    """Write the page for ``specs`` to ``out`` once; returns the :class:`Report` (its sections)."""
    check_out(out)
    rep = Report(specs, probes, max_steps, revisions, progress, allow_nonfinite)
    rep.refresh()
    if not rep.sources:
        raise ProbeError(next(iter(rep.errors.values())))
    write_atomic(out, rep.html(live=False))
    return rep


def watch(specs: list[str], out: str, *, probes: list[str] | None = None, max_steps: int = MAX_STEPS,
          revisions: str | None = None, interval: float = 2.0, max_share: float = 1.0,
          progress: Callable[[str], None] | None = None, log: Callable[[str], None] | None = None,
          allow_nonfinite: bool = False) -> Report:
    """Rewrite ``out`` whenever a run gains a snapshot, until every run reached its last step, or a
    stop signal (Ctrl-C, SIGTERM, SIGHUP: then the page is written once more, no longer reloading
    itself, and :data:`~probe.errors.STOP` holds the signal while the caller's own ``STOP.caught()``
    block lasts).

    ``max_share`` < 1 bounds this process's CPU time (imports included) to that share of one core
    (:class:`Budget`; 0.01 from ``probe-train --report``): a page goes out with what the budget
    allowed, the rest marked pending and filled in at later updates; the last page has everything.
    A run that does not exist yet is waited for.
    """
    from .errors import STOP

    if not 0 < max_share <= 1:
        raise ProbeError(f"bad --max-share {max_share}: need 0 < share <= 1")
    if interval <= 0:
        raise ProbeError(f"bad --interval {interval}: need seconds > 0")
    check_out(out)
    log = log or (lambda msg: None)
    rep = Report(specs, probes, max_steps, revisions, progress, allow_nonfinite)
    budget = Budget(max_share) if max_share < 1 else None
    last = None
    with STOP.caught():
        while True:
            # over budget: wait (reading headers only), but never for the last page
            while (budget is not None and last is not None and not budget.allows() and not STOP.asked
                   and not _finished(rep)):
                _sleep(interval, STOP)
            if STOP.asked:
                normal_priority()
            sig = rep.refresh()
            if not rep.sources:              # nothing to show yet: wait for the run to appear
                if STOP.asked:
                    return rep
                _sleep(interval, STOP)
                continue
            done = rep.done or bool(STOP.asked)
            if sig == last and not rep.pending and not done:
                _sleep(interval, STOP)
                continue
            if done:
                normal_priority()
            t0 = time.perf_counter()
            write_atomic(out, rep.html(live=not done, budget=None if done else budget))
            took = time.perf_counter() - t0
            last = sig
            steps = ", ".join(f"{s.label} step {s.steps[-1] if s.steps else '-'}" for s in rep.sources)
            log(f"wrote {out} ({steps}; {took:.1f} s){'' if done else ', watching'}")
            if done:
                return rep
            _sleep(interval, STOP)


def _finished(rep: Report) -> bool:
    """Whether every run reached its last step (headers only: cheap)."""
    from .format import last_step

    return bool(rep.sources) and all(s.kind == "snapshot" and s.final_step is not None
                                     and (last_step(s.path) or -1) >= s.final_step for s in rep.sources)


def _sleep(seconds: float, stop) -> None:
    end = time.monotonic() + seconds
    while not stop.asked and time.monotonic() < end:
        time.sleep(min(0.2, max(0.0, end - time.monotonic())))
