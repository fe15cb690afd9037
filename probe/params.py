"""Every parameter the probes share, declared once: its command-line help, its API description, its type and
its range.

One :class:`Param` per parameter feeds the API docstrings (a ``{name}`` line, :mod:`probe.docstrings`), the
probe commands and ``probe batch`` (:mod:`probe.cli.options`), the generated reference (docs/generate.py) and
the one check of a value (:func:`check_number`): the API checks, the command line passes the value on, so a
bad value reads the same from both (``top_k=0: need at least 1``, ``Error: --top-k 0: need at least 1``).
A parameter's default is its API function's (its signature), written nowhere else. A probe that gives a
parameter a meaning of its own says so in its declaration (:class:`probe.registry.Probe` ``options``) and
its docstring. Importing this module is cheap (no numpy, no click).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, Callable

#: the step grammar every ``step`` option takes (the command line's --step help, and the probes that say
#: more about their own steps)
STEP_GRAMMAR = "latest, all, a step number, A:B (steps in [A, B)) or a comma list of these"
TOKENS = "group names (reasoning, memory, keys), ids 3,5,7 or a half-open range 11:21"


@dataclass(frozen=True)
class Param:
    """One parameter. ``help``: the command line's (a phrase, or a function of the probe that shows it;
    None: batch); ``doc``: the API docstring's description (sentences; ``{path}``, ``{default}`` and
    ``{nonfinite}`` are the probe's); ``kind``: its type in the docstring, before the signature's default
    (``int`` and ``float`` are the command line's types too, ``bool`` a flag, anything else a string);
    ``lo``/``hi``/``integer``: what :func:`check_number` accepts (``number``: a finite number, no range);
    ``batch``: probe batch's help where it says more. The rest is the command line's spelling: a short flag,
    whether it repeats, whether it names a file (batch hands its workers absolute names, since a Dask worker
    may run in another folder), how its value becomes the API's (``convert``), its metavar."""

    help: str | Callable[[Any], str]
    doc: str = ""
    kind: str = "str"
    lo: float | None = None
    hi: float | None = None
    integer: bool = False
    number: bool = False
    batch: str = ""
    short: str | None = None
    multiple: bool = False
    path: bool = False
    convert: Callable[[Any], Any] | None = None
    metavar: str | None = None

    @property
    def checked(self) -> bool:
        """Whether :func:`check_number` checks it (a number)."""
        return self.number or self.integer or self.lo is not None or self.hi is not None


def _tokens(probe) -> str:
    return f"{TOKENS} [default: {probe.tokens}]" if probe is not None and probe.tokens else TOKENS


def _nonfinite(probe) -> str:
    if probe is not None and probe.nonfinite:
        return f"go on past NaN or inf instead of stopping with an error: {probe.nonfinite} (a warning says what)"
    return ("go on past NaN or inf instead of stopping with an error: each probe computes on the finite part "
            "(probe NAME --help says how) and a warning row says what")


#: every parameter the probes share (the API functions, their commands and batch), by name
PARAMS: dict[str, Param] = {
    "path": Param("", "{path}", "str or os.PathLike"),
    "tokens": Param(_tokens, "The tokens: group names, ids (``\"3,5,7\"``), a half-open range (``\"11:21\"``) or a list "
                    "of ids and group names. ``None`` (and no ``words``): {default}.",
                    "str or sequence of int or str", short="-t"),
    "words": Param("comma-separated words instead of --tokens, looked up in a text run's vocabulary or the checkpoint's "
                   "tokenizer files (multi-token words are left out with a warning)",
                   "Words instead of ``tokens`` (comma-separated or a list), looked up in a text run's stored "
                   "vocabulary or a checkpoint's tokenizer files.", "str or list of str"),
    "words_file": Param("file of words instead of --tokens (one per line or comma-separated)",
                        "A text file of words, selected after ``words``.", path=True),
    "tensor": Param("tensor whose rows are the token vectors (see probe info)",
                    "The tensor whose rows are the token vectors, by canonical name (``token_embedding``) or "
                    "parameter name."),
    "groups": Param("JSON/YAML file: group name -> token ids or words (adds --tokens names)",
                    "A JSON or YAML file of token groups (name -> token ids or words), added to the stored ones.",
                    path=True, batch="JSON/YAML file: group name -> token ids or words, for the probes that read "
                                     "token groups (adds --tokens names)"),
    "mapping": Param("JSON name-mapping file for an unknown checkpoint layout",
                     "A JSON name-mapping file (canonical -> raw tensor names) for a checkpoint of an unknown layout.",
                     path=True),
    "layer": Param("attention layer, 0-based", "The attention layer, 0-based.", "int", integer=True, short="-l",
                   batch="attention layer, 0-based [default: align: 0; attention: every layer]"),
    "head": Param("attention head of --layer, 0-based [default: 0]", "The query head of ``layer`` (default: 0).", "int",
                  integer=True),
    "top_k": Param("top singular vectors of W_V compared with the embeddings",
                   "Singular vectors compared with the embeddings.", "int", lo=1, integer=True),
    "n_components": Param("principal components to report",
                          "Principal components kept (at most min(k, d) are returned).", "int", lo=1, integer=True),
    "neurons": Param("weight whose neurons are grouped by cosine ('': none)",
                     "The weight whose neurons are grouped; ``\"\"`` or ``None``: none (the default is skipped on a "
                     "model without attention).", "str or None", convert=lambda v: v or None),
    "tolerance": Param("half-width around 0 of the critical slope (regime --widths)",
                       "The half-width around zero of the critical line: a slope whose whole 95 % interval lies "
                       "within it is critical (0.1 over widths 32 to 256: a 1.23-fold change of RD).", "float",
                       lo=0.0),
    "threshold": Param("cosine above which two neurons of --neurons are grouped",
                       "Cosine above which two neurons are linked.", "float", lo=-1.0, hi=1.0),
    "anchor": Param("s0 of the cos(w(s0), w(s_j)) profile [default: the middle token]",
                    "The token s0 of the profile, one of the chosen tokens (default: the middle one).", "int"),
    "dim": Param("length of the eq. 14 vectors [default: vocabulary size]",
                 "Length of the reconstructed vectors (default: the vocabulary size, where the Gaussian bump of P^s "
                 "lives).", "int", lo=1, integer=True),
    "seed": Param("seed of the eq. 14 noise", "Seed of the reconstruction's noise.", "int", lo=0, integer=True),
    "full": Param("every sequence of each split, not the subset the trainer logged its metrics on",
                  "Evaluate every sequence of each split, not only the trainer's metric sequences.", "bool"),
    "splits": Param("split A then split B (give twice) [default: the task's pair: anchor mem, rsn_train; lm story, "
                    "logic]", "The splits (A, B); by default the task's pair (anchor task: ``mem``, ``rsn_train``; "
                    "text runs: ``story``, ``logic``).", "tuple of (str, str)", multiple=True,
                    convert=lambda v: tuple(v) if v else None),
    "saturation": Param("ε share s = ε / (m + ε) from which a norm site counts as saturated (0.1: its output rms is "
                        "<= 95 % of a clean norm's)", "ε share at or above which a site counts as saturated.",
                        "float", lo=0.0, hi=1.0),
    "min_query": Param("first query position counted (earlier queries see little besides position 0)",
                       "The first query position counted.", "int", lo=1, integer=True),
    "sink_threshold": Param("mean attention on position 0 from which a head counts as a sink head",
                            "Mean sink mass at or above which a head is a sink head.", "float", lo=0.0, hi=1.0),
    "step_b": Param("step of run B (default: its latest step, or with --step all / A:B / N the same steps as run A); "
                    "with one file, the second step to compare",
                    "B's step; by default B's latest step, or with several or a numbered ``step`` the same steps as A.",
                    "str or int"),
    "buckets": Param("quantile buckets per token feature", "Quantile bins per feature.", "int", lo=1, integer=True),
    "text": Param("for a checkpoint: a text file to run the model on, with its tokenizer files (a snapshot file stores "
                  "what it needs)", "Checkpoints only: a text file to run the model on (with its tokenizer files); a "
                  "snapshot file stores what it needs, and ``text`` is ignored there (with a warning).", path=True),
    "window": Param("with --text: tokens per window the model sees",
                    "Checkpoints: tokens per window the text is cut into.", "int", lo=2, integer=True),
    "max_tokens": Param("with --text: at most this many tokens of the text",
                        "Checkpoints: tokens of the text used at most.", "int", lo=2, integer=True),
    "delta": Param("the loss has escaped once it is below ln V minus this (nats)",
                   "How far below ln V the smoothed loss must fall to have escaped (nats).", "float", lo=0.0),
    "smooth": Param("steps averaged for the escape test", "Steps the loss is averaged over for the escape.", "int",
                    lo=1, integer=True),
    "spike_factor": Param("a spike is a loss above this many times the running median",
                          "A spike's loss over the running median.", "float", lo=1.0),
    "spike_window": Param("steps in the running median", "Steps of the running median.", "int", lo=1, integer=True),
    "precision": Param("precision of the Gram matrix, float64 (WeightWatcher's values to machine precision) or "
                       "float32 (about twice as fast, ~1e-6 relative)",
                       "Precision of the Gram matrix: float64 gives WeightWatcher's values to machine precision, "
                       "float32 is about twice as fast (eigenvalues to ~1e-6 relative).", '{"float64", "float32"}'),
    "threads": Param("work at once, one thread each (0: one per CPU core)",
                     "Work done at once, one thread each (0: one per CPU core).", "int", lo=0, integer=True,
                     batch="spectrum: layers, ood: snapshots analysed at once, one BLAS/torch thread each (0: one per "
                           "CPU core; with --jobs above 1 or --scheduler, 1)"),
    "max_memory": Param("memory budget of what the probe reads and computes (512MB, 8GiB or bytes): a tensor that needs "
                        "more is refused before it is read [default: half of the memory this process can have: "
                        "physical memory, or a lower cgroup or ulimit -v limit]",
                        "The memory budget of what the probe reads and computes (bytes, or ``\"8GiB\"``, "
                        "``\"512MB\"``): a tensor that needs more is refused before it is read. ``None``: half of the "
                        "memory this process can have (physical memory, or a lower cgroup or ``ulimit -v`` limit).",
                        "int or str", metavar="SIZE"),
    "step": Param(STEP_GRAMMAR, "The snapshots: ``\"latest\"``, ``\"all\"``, a step number, a half-open range "
                  "``\"A:B\"`` or a comma list of these (``\"100,500,latest\"``). A checkpoint holds one step, a "
                  "folder of checkpoints one per checkpoint.",
                  "str or int", short="-s", batch=f"snapshot files: {STEP_GRAMMAR} (a checkpoint holds one step)"),
    "skip_damaged": Param("a folder of checkpoints: leave out a checkpoint that cannot be read (truncated, damaged), "
                          "a warning naming its step, instead of stopping with an error",
                          "A folder of checkpoints: leave out a checkpoint that cannot be read (a truncated or "
                          "damaged file), with a ``ProbeWarning`` naming its step, instead of raising; each chosen "
                          "checkpoint is opened when the steps are chosen. A snapshot file is read as without it.",
                          "bool", batch="a checkpoint that cannot be read (truncated, damaged) is a warning row, not "
                                        "an error row, and the batch exits 0"),
    "allow_nonfinite": Param(_nonfinite, "Compute on the finite part instead of raising on NaN or inf: {nonfinite}. A "
                             "``ProbeWarning`` says what was left out.", "bool"),
}


def bounds(p: Param) -> str:
    """The range of ``p`` in words (``at least 1``; "" without one)."""
    if p.lo is None and p.hi is None:
        return ""
    return f"at least {p.lo}" if p.hi is None else f"at most {p.hi}" if p.lo is None else f"between {p.lo} and {p.hi}"


def check_number(name: str, value):
    """``value`` if it is what parameter ``name`` takes (:data:`PARAMS`: a finite number, an integer where
    declared so, in its range); else a ProbeError naming the parameter (``top_k=0: need at least 1``; a
    command line: ``--top-k 0: need at least 1``)."""
    from .errors import ProbeError, param

    p = PARAMS[name]
    ok = isinstance(value, Integral) if p.integer else isinstance(value, Real)
    if not ok or isinstance(value, bool) or not math.isfinite(float(value)):
        raise ProbeError(f"{param(name, value)}: need {'an integer' if p.integer else 'a finite number'}")
    if (p.lo is not None and value < p.lo) or (p.hi is not None and value > p.hi):
        raise ProbeError(f"{param(name, value)}: need {bounds(p)}")
    return value
