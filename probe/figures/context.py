"""What a figure script works with: the papers' experiments at each size, declared as runs
(:class:`RunSpec`, nothing trained by declaring), the claims a figure checks, and
:class:`FigureContext`, which trains the runs a declaration lacks and saves figures."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..files import writable_folder, write_atomic
from ..errors import ProbeError, param

SIZES = ("tiny", "quick", "full")
DEFAULT_SEEDS = {"tiny": 1, "quick": 3, "full": 1}
TEXT = ("lm", "llm")   # the experiments on logic + stories: their story source is the context's ``stories``
STORY_NAMES = {"kjv": "King James narrative (kjv)", "synthetic": "template stories (synthetic)",
               "tinystories": "TinyStories"}

# Each experiment of the papers at each size: (preset, overrides). ``quick`` is what a 2-core CPU
# trains for every figure in minutes; docs/figures.md gives, per figure, the effect it states and the
# fraction of seeds that show it at this size (bench/bench_figures.py measures both).
EXPERIMENTS: dict[str, dict[str, tuple[str, dict]]] = {
    "anchor": {"tiny": ("tiny", {}), "quick": ("quick", {"steps": 1000, "eval_size": 256}), "full": ("paper1", {})},
    "emb_mlp": {"tiny": ("tiny", {"model": "emb-mlp", "bias": False}), "quick": ("emb-mlp-quick", {}),
                "full": ("emb-mlp-quick", {"d_model": 400, "d_ff": 1200, "steps": 20000, "n_samples": 200_000,
                                           "key_max": 120})},
    "composite": {"tiny": ("tiny", {"task": "composite", "key_min": 20, "key_max": 99}),
                  "quick": ("composite-mini", {}), "full": ("composite-paper", {})},
    "lm": {"tiny": ("lm-tiny", {}), "quick": ("lm-mini", {}), "full": ("lm-gpt2", {})},
    "llm": {"tiny": ("llm-tiny", {}), "quick": ("llm-mini", {}), "full": ("llm-gpu", {})},
}


@dataclass(frozen=True)
class RunSpec:
    """One run a figure draws: its label in the runs folder, its preset and overrides."""

    label: str
    preset: str
    overrides: tuple[tuple[str, Any], ...]

    @property
    def config(self) -> dict:
        return dict(self.overrides)

    @property
    def wanted(self) -> tuple[str, dict]:
        return self.preset, self.config


def specs(declared) -> list[RunSpec]:
    """Every RunSpec in a declaration (a RunSpec, or lists / dicts of them), in order, once."""
    if isinstance(declared, RunSpec):
        return [declared]
    if isinstance(declared, Mapping):
        declared = list(declared.values())
    if not isinstance(declared, (list, tuple)):
        return []
    return list(dict.fromkeys(s for x in declared for s in specs(x)))


def seed_count(declared) -> int:
    """Seeds a declaration draws: its longest list of per-seed runs (1 without any)."""
    if isinstance(declared, Mapping):
        return max([seed_count(v) for v in declared.values()], default=1)
    if isinstance(declared, (list, tuple)):
        return max([len(declared)] + [seed_count(v) for v in declared])
    return 1


def resolved(declared, paths: Mapping[RunSpec, Path]):
    """The declaration with each RunSpec replaced by its run file."""
    if isinstance(declared, RunSpec):
        return paths[declared]
    if isinstance(declared, Mapping):
        return {k: resolved(v, paths) for k, v in declared.items()}
    if isinstance(declared, (list, tuple)):
        return type(declared)(resolved(v, paths) for v in declared)
    return declared


@dataclass
class Claim:
    """One statement a figure makes, checked in each seed (or seed pair) it draws.

    text    what the figure states, e.g. "γ 0.8 answers held-out pairs: rsn_test acc > 0.5"
    values  the number behind it, per seed
    holds   whether that seed shows it
    expect  whether this size is expected to show it; False: a paper's direction that the CPU sizes were
            measured not to show (the docs say where), checked and reported as measured all the same
    """

    text: str
    values: list[float]
    holds: list[bool]
    expect: bool = True

    def summary(self) -> dict:
        from ..analyses.uncertainty import proportion

        return {"claim": self.text, "expected": self.expect, "values": [float(v) for v in self.values],
                **proportion(self.holds)}


def claim(text: str, values, test: Callable[[float], bool], expect: bool = True) -> Claim:
    """A Claim from per-seed numbers and the test each must pass (``expect``: see :class:`Claim`)."""
    values = [float(v) for v in values]
    return Claim(text, values, [bool(test(v)) for v in values], expect)


@dataclass
class FigureContext:
    """What a figure script gets: where to write, how big, and the papers' experiments to declare runs."""

    out: Path
    size: str = "quick"
    runs_dir: Path | None = None
    jobs: int = 0
    seeds: int = 0   # seeds per γ in figures that compare γ (0: the size's default: tiny 1, quick 3, full 1)
    log: Callable[[str], None] = field(default=lambda msg: print(msg, file=sys.stderr, flush=True))
    create: bool = True   # make the output and runs folders (False: a dry run, which writes nothing)
    # the story text of the runs on logic + stories (``--stories`` of probe-train); None: at --quick the
    # King James narrative when it is installed (real text, issue 38), else each preset's own
    stories: str | None = None

    def __post_init__(self):
        self.failed_runs: dict[Path, str] = {}   # run file -> the error its training ended with (not retried)
        self.at_once = False   # the experiments train and return files (a script without runs())
        if self.size not in SIZES:
            raise ProbeError(f"unknown size '{self.size}' (known: {', '.join(SIZES)})")
        if self.seeds < 0:
            raise ProbeError(f"{param('seeds', self.seeds)}: need 1 or more (0: the size's default)")
        self.seeds = self.seeds or DEFAULT_SEEDS[self.size]
        self._kjv_missing = False
        if self.stories is None and self.size == "quick":
            from probe_train.text.kjv import installed as kjv_installed

            self.stories, self._kjv_missing = ("kjv", False) if kjv_installed() else (None, True)
        self.out = Path(self.out)
        self.runs_dir = Path(self.runs_dir) if self.runs_dir else self.out / "runs"
        if not self.create:
            return
        for d in (self.out, self.runs_dir):
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ProbeError(f"cannot create {d}: {exc.strerror}") from None
        # before any training: a read-only output folder fails now, in one line (the runs folder may be
        # a read-only share of finished runs; a trainer that must write there says so itself)
        writable_folder(self.out, "figures")

    @property
    def quick(self) -> bool:
        return self.size != "full"

    @property
    def story_source(self) -> str:
        """The story text of this context's runs on logic + stories, in words (for titles)."""
        from probe_train.config import preset

        source = self.stories or preset(EXPERIMENTS["lm"][self.size][0]).stories
        return STORY_NAMES.get(source, f"stories from {Path(source).name}")

    def title(self, title: str, caveat: str = "", text: bool = False) -> str:
        """A figure's title; ``text``: drawn from runs on logic + stories, say which stories; at the CPU
        sizes with what they do not show (``caveat``)."""
        title = f"{title} — logic + {self.story_source}" if text else title
        return f"{title}\n({caveat})" if caveat and self.quick else title

    def on_gpu(self) -> bool:
        """Whether the runs train on a GPU (the full size, with CUDA): then one at a time."""
        return self.size == "full" and cuda_available()

    # --- the papers' experiments: declarations, nothing trained -------------------------------
    # With ``seeds=True`` each key holds the runs of seeds 0 .. ctx.seeds - 1 (seed 0 is the run the
    # figures without seeds draw, so they share it).
    def _declare(self, experiment: str, base: dict, seeds: bool) -> dict:
        """{key: (label, overrides)} -> {key: RunSpec} or {key: [RunSpec per seed]} at this size."""
        name, sized = EXPERIMENTS[experiment][self.size]
        if experiment in TEXT and self.stories:
            sized = {**sized, "stories": self.stories}
            base = {k: (f"{label}-{Path(self.stories).name}", o) for k, (label, o) in base.items()}
        elif experiment in TEXT and self._kjv_missing:
            from probe_train.text.kjv import INSTALL as KJV_INSTALL

            self._kjv_missing = False   # said once
            self.log(f"note: the King James text is not installed ({KJV_INSTALL}); the language figures use "
                     "the presets' template stories")
        out = {}
        for key, (label, overrides) in base.items():
            runs = [RunSpec(label + (f"-s{s}" if s else ""), name,
                            tuple({**sized, **overrides, **({"seed": s} if s else {})}.items()))
                    for s in range(self.seeds if seeds else 1)]
            out[key] = runs if seeds else runs[0]
        return self.train(out) if self.at_once else out

    def declare(self, preset: str, runs: Mapping[str, dict]) -> dict:
        """Any runs, at every size: {label: overrides of ``preset``} -> {label: RunSpec}."""
        out = {label: RunSpec(label, preset, tuple(overrides.items())) for label, overrides in runs.items()}
        return self.train(out) if self.at_once else out

    def anchor(self, gammas=(0.3, 0.5, 0.8), seeds: bool = False) -> dict:
        """Paper 1's anchor task on the transformer, one run per γ (and seed)."""
        return self._declare("anchor", {g: (f"anchor-g{g}", {"gamma": g}) for g in gammas}, seeds)

    def emb_mlp(self, gammas=(0.3, 0.5, 0.8), seeds: bool = False) -> dict:
        """Paper 1 Fig. 3B: the Emb-MLP on the anchor task."""
        return self._declare("emb_mlp", {g: (f"embmlp-g{g}", {"gamma": g}) for g in gammas}, seeds)

    def composite(self, gammas=(0.3, 0.5, 0.8), layers=(2,), seeds: bool = False) -> dict:
        """Paper 2's composite task, one run per (γ, depth) (and seed)."""
        return self._declare("composite", {(g, n): (f"composite-g{g}-L{n}", {"gamma": g, "layers": n})
                                           for g in gammas for n in layers}, seeds)

    def lm(self, gammas=(0.3, 0.5, 0.8), seeds: bool = False) -> dict:
        """Paper 1's real-language experiment: logic text mixed with stories."""
        return self._declare("lm", {g: (f"lm-g{g}", {"gamma": g}) for g in gammas}, seeds)

    def llm(self, gammas=(0.5, 1.0), eps=(1e-5,), gated=(False,), seeds: bool = False) -> dict:
        """Paper 4: LLaMA-style pretraining on logic + stories, one run per (γ, ε, gated attention)."""
        return self._declare("llm", {(g, e, a): (f"llm-g{g}-eps{e:g}" + ("-gated" if a else ""),
                                                 {"gamma": g, "norm_eps": e, "gated_attention": a})
                                     for g in gammas for e in eps for a in gated}, seeds)

    # --- runs: files, training ---------------------------------------------------------------
    def plan(self, wanted: Mapping[str, tuple[str, dict]]):
        """(path of every run in ``wanted`` = {label: (preset, overrides)}, the jobs that are missing)."""
        from probe_train.runs import plan

        return plan(wanted, self.runs_dir, threads=None if self.on_gpu() else 1)

    def runs(self, wanted: Mapping[str, tuple[str, dict]]) -> dict[str, Path]:
        """Paths of finished runs for ``wanted`` = {label: (preset, overrides)}; trains what is missing,
        ``jobs`` at a time (one CPU thread each on a CPU). A run that failed raises ProbeError."""
        paths, todo = self.plan(wanted)
        todo = [job for job in todo if job.path not in self.failed_runs]
        if todo:
            self.train_jobs(todo)
        for label, path in paths.items():   # a run that failed fails every figure that needs it
            if path in self.failed_runs:
                raise ProbeError(f"training run '{label}' failed: {self.failed_runs[path]}")
        return paths

    def train(self, declared):
        """The declaration with run files in place of RunSpecs; trains what is missing."""
        found = specs(declared)
        paths = self.runs({s.label: s.wanted for s in found})
        return resolved(declared, {s: paths[s.label] for s in found})

    def train_jobs(self, todo, on_end: Callable[[Path], None] | None = None) -> None:
        """Train the jobs, longest first; a failed run is logged and remembered (the figures that need
        it fail, the others go on). ``on_end(path)`` is called as each run ends."""
        from probe_train.runs import train_jobs

        def ended(job, error: str | None) -> None:
            if error is not None:   # before on_end: a figure that needs this run must see it failed
                self.failed_runs[job.path] = error
            if on_end is not None:
                on_end(job.path)

        todo = sorted(todo, key=lambda job: -(job.seconds or 0.0))   # the longest never starts last
        failed = train_jobs(todo, 1 if self.on_gpu() else self.jobs, self.log, keep_going=True, on_end=ended)
        self.failed_runs.update({job.path: failed[job.label] for job in todo if job.label in failed})

    def save(self, fig, name: str) -> list[Path]:
        """Write ``name``.png and ``name``.pdf into the output folder and close the figure."""
        paths = [self.out / f"{name}.png", self.out / f"{name}.pdf"]
        try:
            for p in paths:   # atomically: a full disk leaves the old figure, never half a new one
                write_atomic(p, lambda fh, fmt=p.suffix[1:]: fig.savefig(fh, format=fmt), "figure")
        finally:
            import matplotlib.pyplot as plt

            plt.close(fig)
        self.log(f"  wrote {paths[0]} (+ .pdf)")
        return paths


def cuda_available() -> bool:
    from probe_train.runs import cuda_available as available

    return available()
