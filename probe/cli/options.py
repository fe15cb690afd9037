"""Every shared option of the ``probe`` CLI, declared once, and said about each command.

An option is named like the API parameter it feeds (``--top-k`` -> ``top_k``) and its default
is that parameter's default (``tests/test_cli_options.py`` checks both against
:mod:`probe.api`), so the same concept has the same flag and default in every command. Defaults live
here as constants because ``Annotated`` options take them from the signature: ``step: Step = STEP``.

Its help is about the command that shows it: where an option means more or other in one command (its
default there, what it applies to), the declaration holds that command's text (``per``), and
:func:`about` gives the option as a command declares it (``tests/test_cli_help.py`` reads every
command's help for text about another command). The probes' own parts come from :mod:`probe.registry`
(default tokens, what ``--allow-nonfinite`` leaves out); ``probe batch`` names the probes an option
applies to (:func:`.probes.batch_options`).
"""
from __future__ import annotations

from copy import copy
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Callable, Optional, get_args, get_origin

import typer

from .. import registry


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


# --- one declaration, said about each command ------------------------------------------------------

#: the declared options whose help differs by command: id of its typer info -> command -> that command's
#: help (None: the shared help is about the command as it stands)
_PER: dict[int, Callable[[str], Optional[str]]] = {}


def _declare(kind, info, per):
    if per is not None:
        _PER[id(info)] = per if callable(per) else per.get
    return Annotated[kind, info]


def _option(kind, *decls: str, help: str, per=None, **kw):
    """An option with its shared ``help``; ``per``: a command -> help mapping, or a function of the
    command returning its help (None where the shared help holds), for the commands it differs in."""
    return _declare(kind, typer.Option(*decls, help=help, **kw), per)


def _argument(kind, help: str, per=None):
    return _declare(kind, typer.Argument(help=help, show_default=False), per)


def own_help(annotation, command: str) -> Optional[str]:
    """The help declared for ``command`` alone (None: the shared help)."""
    per = _PER.get(id(get_args(annotation)[1]))
    return per(command) if per is not None else None


def help_of(annotation, command: str) -> str:
    """The help ``probe COMMAND --help`` shows for ``annotation`` (one of this module's declarations)."""
    return own_help(annotation, command) or get_args(annotation)[1].help


def about(annotation, command: str, prefix: str = ""):
    """``annotation`` as ``probe COMMAND`` offers it: its help written for that command, ``prefix`` first
    (batch: the probes it applies to). The flag, default and type stay the shared declaration's."""
    if get_origin(annotation) is not Annotated:
        return annotation
    kind, info = get_args(annotation)[:2]
    text = prefix + help_of(annotation, command)
    if text == info.help:
        return annotation
    info = copy(info)
    info.help = text
    return Annotated[kind, info]


def _probe(command: str) -> Optional[registry.Probe]:
    return registry.BY_NAME.get(command)


# --- arguments ---------------------------------------------------------------------------------
_HF = "a Hugging Face model folder or a hub model hf:ORG/NAME[@REVISION]"
File = _argument(str, "snapshot file (.h5) written by probe-train",
                 per={"validate": "file to check: a snapshot file (.h5) written by probe-train"})
Source = _argument(
    str, "snapshot file, or a checkpoint: Hugging Face folder, .safetensors, .pt/.pth/.bin state dict, nanoGPT "
         "ckpt.pt, or a hub model hf:ORG/NAME[@REVISION]",
    per=lambda c: (f"run A: a snapshot file, or (with --text) {_HF}" if c == "tokens" else
                   f"snapshot file, or (with --text) {_HF}"
                   if _probe(c) and _probe(c).reads == registry.ACTIVATIONS else None))

# --- output ------------------------------------------------------------------------------------
FORMAT = Format.table
Fmt = _option(Format, "--format", "-f", help="table, json (strict: no NaN) or csv (tidy: step,metric,key,value); "
                                             "data on stdout, logs on stderr", per={
    "validate": "table (a line per finding, or 'valid', then a 'note:' line per note), json ({file, valid, "
                "findings, notes}) or csv (tidy: step,metric,key,value, a finding or note per row)",
    "batch": "of the table on stdout: table, json (a list of rows) or csv (path,step,probe,key,metric,value); "
             "--out takes the format of its extension",
    "sweep-summary": "table (per cell: each metric's mean, std and interval, then each outcome's fraction), json "
                     "(strict: no NaN) or csv (tidy: step,metric,key,value)",
    "figures": "of the --dry-run plan and the --check claims: table, json or csv (figures made: their files, a "
               "line each)"})
Plot = _option(Optional[str], help="write a figure to this .png/.pdf/.svg")
WIDE = False
Wide = _option(bool, help="table: print everything at full width (every column of a matrix, every key of a "
                          "metric) instead of fitting 100 columns")
Out = _option(Optional[str], "--out", "-o", help="where results go", per={
    "batch": "write the table to this .csv or .json instead of stdout; re-running skips what it already holds",
    "figures": "folder of the figures [default: figures]",
    "report": "the page to write (.html) [default: report.html]"})

TensorBoard = _option(Optional[str], "--tensorboard", metavar="DIR", help=(
    "also write the table's numbers as TensorBoard scalars, PROBE/METRIC[KEY] at each step, into a run per "
    "folder under DIR: a snapshot file is a run named by its stem, step-named checkpoints (model_500.pt, "
    "checkpoint-500/) the steps of a run named by their folder; the similarity matrix's cells are left out, "
    "and a run folder only grows (steps after those it holds). Needs pip install 'gamma-probe[tensorboard]'"))

# --- what to read ------------------------------------------------------------------------------
STEP = "latest"
_STEPS = "latest, all, a step number, A:B (steps in [A, B)) or a comma list of these"
Step = _option(str, "--step", "-s", help=_STEPS, per={
    "batch": f"snapshot files: {_STEPS} (a checkpoint holds one step)",
    "sweep-summary": "the step each run is read at: latest (finished runs only) or a step number every run has",
    "tokens": f"step of run A: {_STEPS}",
    "dynamics": f"the snapshots up to which the loss log is read: {_STEPS}"})
_TOKENS = "group names (reasoning, memory, keys), ids 3,5,7 or a half-open range 11:21"


def _tokens_help(command: str) -> Optional[str]:
    if command == "batch":   # each probe its own default, so batch names them all
        by: dict[str, list[str]] = {}
        for p in registry.PROBES:
            if p.batch and p.tokens:
                by.setdefault(p.tokens, []).append(p.name)
        each = "; ".join(f"{', '.join(n)}: {t}" for t, n in by.items())
        return f"{_TOKENS} [default: each probe's own: {each}]"
    p = _probe(command)
    return f"{_TOKENS} [default: {p.tokens}]" if p and p.tokens else None


Tokens = _option(Optional[str], "--tokens", "-t", help=_TOKENS, per=_tokens_help)
Words = _option(Optional[str], help="comma-separated words instead of --tokens, looked up in a text run's vocabulary "
                                    "or the checkpoint's tokenizer files (multi-token words are left out with a "
                                    "warning)",
                per={"theory": "comma-separated words instead of --tokens, looked up in a text run's vocabulary "
                               "(multi-token words are left out with a warning)"})
WordsFile = _option(Optional[str], help="file of words instead of --tokens (one per line or comma-separated)")
TENSOR = "token_embedding"
Tensor = _option(str, help="tensor whose rows are the token vectors (see probe info)")
Groups = _option(Optional[str], help="JSON/YAML file: group name -> token ids or words (adds --tokens names)", per={
    "align": "JSON/YAML file: group name -> token ids or words, the groups W_V's singular vectors are compared "
             "with [default: the run's stored groups]",
    "rank": "JSON/YAML file: group name -> token ids or words (checked; the ranks do not depend on groups)",
    "batch": "JSON/YAML file: group name -> token ids or words, for the probes that read token groups (adds "
             "--tokens names)"})


def _probes_help(command: str) -> Optional[str]:
    def listed(*reads):
        return ", ".join(registry.names("batch", reads))

    if command == "report":   # a checkpoint folder gets the weight probes (the report runs no --text)
        weights = ", ".join(registry.names("report", (registry.WEIGHTS,)))
        others = ", ".join(registry.names("report", (registry.ACTIVATIONS, registry.SNAPSHOT)))
        return (f"probe whose section to show (repeat for several): {weights}; on snapshot files also {others} "
                "[default: every probe that applies to the run]")
    return (f"probe to run (repeat for several): {listed(registry.WEIGHTS)}; {listed(registry.ACTIVATIONS)} "
            f"(checkpoints: with --text); on snapshot files also {listed(registry.SNAPSHOT)}")


Probes = _option(list[str], "--probe", "-p", help=_probes_help("batch"), per=_probes_help, show_default=False)
Revisions = _option(Optional[str], help="hub sources (hf:ORG/NAME): a comma list of revisions (step1000,step2000) or "
                                        "all (every branch and tag, in step order); HF_HUB_OFFLINE=1 reads the "
                                        "local hub cache only")
Mapping = _option(Optional[str], help="JSON name-mapping file for an unknown checkpoint layout")
Layer = _option(Optional[int], "--layer", "-l", help="attention layer, 0-based", per={
    "align": "attention layer of the head, 0-based [default: 0]",
    "attention": "attention layer, 0-based [default: every layer]",
    "batch": "attention layer, 0-based [default: align: 0; attention: every layer]"})
Head = _option(Optional[int], help="attention head of --layer, 0-based [default: 0]")

ALLOW_NONFINITE = False


def _nonfinite_help(command: str) -> Optional[str]:
    p = _probe(command)
    if p is not None and p.nonfinite:
        return f"go on past NaN or inf instead of stopping with an error: {p.nonfinite} (a warning says what)"
    if command == "report":
        return ("go on past NaN or inf instead of stopping with an error: each probe computes on the finite part "
                "(probe NAME --help says how) and its section notes what was left out")
    return None


AllowNonfinite = _option(   # the shared help is batch's
    bool, help="go on past NaN or inf instead of stopping with an error: each probe computes on the finite part "
               "(probe NAME --help says how) and a warning row says what", per=_nonfinite_help)

# --- probe settings ----------------------------------------------------------------------------
TOP_K = 3
TopK = _option(int, min=1, help="top singular vectors of W_V compared with the embeddings")
N_COMPONENTS = 3
NComponents = _option(int, min=1, help="principal components to report")
NEURONS = "layer0/W_Q"
Neurons = _option(str, help="weight whose neurons are grouped by cosine ('': none)")
THRESHOLD = 0.7
Threshold = _option(float, help="cosine above which two neurons of --neurons are grouped")
Anchor = _option(Optional[int], help="s0 of the cos(w(s0), w(s_j)) profile [default: the middle token]")
Dim = _option(Optional[int], help="length of the eq. 14 vectors [default: vocabulary size]")
SEED = 0
Seed = _option(int, help="seed of the eq. 14 noise")
FULL = False
Full = _option(bool, help="every sequence of each split, not the subset the trainer logged its metrics on")
Splits = _option(Optional[list[str]], help="split A then split B (give twice) [default: the task's pair: anchor "
                                           "mem, rsn_train; lm story, logic]")

PRECISION = "float64"
Precision = _option(str, help="precision of the Gram matrix, float64 (WeightWatcher's values to machine precision) "
                              "or float32 (about twice as fast, ~1e-6 relative)")

THREADS = 0
Threads = _option(int, min=0, help="work at once, one thread each (0: one per CPU core)", per={
    "spectrum": "layers analysed at once, one BLAS thread each (0: one per CPU core)",
    "ood": "snapshots evaluated at once, one torch thread each (0: one per CPU core); the numbers do not depend "
           "on it",
    "batch": "spectrum: layers, ood: snapshots analysed at once, one BLAS/torch thread each (0: one per CPU core; "
             "with --jobs above 1 or --scheduler, 1)"})

MAX_MEMORY = None    # the API's default (probe._limits.MAX_MEMORY): half of the memory the process can have
MaxMemory = _option(Optional[str], metavar="SIZE", help=(
    "memory budget of what the probe reads and computes (512MB, 8GiB or bytes): a tensor that needs more is "
    "refused before it is read [default: half of the memory this process can have: physical memory, or a lower "
    "cgroup or ulimit -v limit]"), per={
    "report": "memory budget of each probe's reads and math (512MB, 8GiB or bytes): a tensor that needs more is "
              "refused before it is read, and the probe's section says so [default: half of the memory this "
              "process can have: physical memory, or a lower cgroup or ulimit -v limit]"})

# --- paper 4 ---------------------------------------------------------------------------------
SATURATION = 0.1
Saturation = _option(float, help="ε share s = ε / (m + ε) from which a norm site counts as saturated (0.1: its output "
                                 "rms is <= 95 % of a clean norm's)")
MIN_QUERY = 4
MinQuery = _option(int, min=1, help="first query position counted (earlier queries see little besides position 0)")
SINK_THRESHOLD = 0.3
SinkThreshold = _option(float, help="mean attention on position 0 from which a head counts as a sink head")
Text = _option(Optional[str], help="for a checkpoint: a text file to run the model on, with its tokenizer files (a "
                                   "snapshot file stores what it needs)",
               per={"tokens": "for two checkpoints: a text file to run both models on, with their tokenizer files "
                              "(snapshot files store their token-probe windows)"})
WINDOW = 128
Window = _option(int, min=2, help="with --text: tokens per window the model sees")
MAX_TOKENS = 4096
MaxTokens = _option(int, min=2, help="with --text: at most this many tokens of the text")
BUCKETS = 4
Buckets = _option(int, min=1, help="quantile buckets per token feature")
StepB = _option(Optional[str], help="step of run B (default: its latest step, or with --step all / A:B / N the same "
                                    "steps as run A); with one file, the second step to compare")

DELTA = 0.5
Delta = _option(float, help="the loss has escaped once it is below ln V minus this (nats)")
SMOOTH = 10
Smooth = _option(int, min=1, help="steps averaged for the escape test")
SPIKE_FACTOR = 1.3
SpikeFactor = _option(float, help="a spike is a loss above this many times the running median")
SPIKE_WINDOW = 50
SpikeWindow = _option(int, min=1, help="steps in the running median")

# --- sweeps -------------------------------------------------------------------------------------
Metric = _option(Optional[list[str]], help=(
    "number per run (repeat): acc[SPLIT], loss[SPLIT], train_loss, or PROBE:NAME such as similarity:distance_corr "
    "or pca:order_pc1[reasoning], the probe's options in brackets: similarity(tokens=logic):mean_offdiag "
    "[default: every logged accuracy]"))
Outcome = _option(Optional[list[str]], help=(
    "binary outcome per run (repeat): A>B, A<B, A>=B or A<=B with metrics or numbers [default: composite "
    "acc[ood_inferential]>acc[ood_symmetric]; anchor acc[rsn_test]>0.5]"))

# --- running -----------------------------------------------------------------------------------
JOBS = 0
Jobs = _option(int, "--jobs", "-j", min=0, help="processes at once (0: automatic)", per={
    "batch": "worker processes at once, one BLAS thread each; 0 or 1: this process, whose BLAS uses every core",
    "figures": "training runs at once; 0: one per CPU core"})

# --- arguments of one probe ----------------------------------------------------------------------
Other = _argument(Optional[str], "run B (default: FILE again, at --step-b)")


# --- API parameter -> option ---------------------------------------------------------------------

def _or_none(value):
    return value or None


def _tuple(value):
    return tuple(value) if value else None


@dataclass(frozen=True)
class Opt:
    """How the command line offers one API parameter: its option (or argument), its default, how its
    value becomes the API's (``convert``) and whether it names a file (``path``: batch hands its
    workers absolute names, since a Dask worker may run in another folder)."""

    annotation: Any
    default: Any = None
    convert: Optional[Callable[[Any], Any]] = None
    path: bool = False


#: every API parameter a probe command (and batch) offers, by name: the probe commands are built from
#: the API functions' signatures and this table (:mod:`.probes`)
OPTIONS: dict[str, Opt] = {
    "other": Opt(Other),
    "tokens": Opt(Tokens), "words": Opt(Words), "words_file": Opt(WordsFile, path=True),
    "tensor": Opt(Tensor, TENSOR), "groups": Opt(Groups, path=True), "mapping": Opt(Mapping, path=True),
    "layer": Opt(Layer), "head": Opt(Head), "top_k": Opt(TopK, TOP_K), "n_components": Opt(NComponents, N_COMPONENTS),
    "neurons": Opt(Neurons, NEURONS, _or_none), "threshold": Opt(Threshold, THRESHOLD),
    "anchor": Opt(Anchor), "dim": Opt(Dim), "seed": Opt(Seed, SEED),
    "full": Opt(Full, FULL), "splits": Opt(Splits, None, _tuple),
    "saturation": Opt(Saturation, SATURATION), "min_query": Opt(MinQuery, MIN_QUERY),
    "sink_threshold": Opt(SinkThreshold, SINK_THRESHOLD),
    "step_b": Opt(StepB), "buckets": Opt(Buckets, BUCKETS),
    "text": Opt(Text, path=True), "window": Opt(Window, WINDOW), "max_tokens": Opt(MaxTokens, MAX_TOKENS),
    "delta": Opt(Delta, DELTA), "smooth": Opt(Smooth, SMOOTH), "spike_factor": Opt(SpikeFactor, SPIKE_FACTOR),
    "spike_window": Opt(SpikeWindow, SPIKE_WINDOW),
    "precision": Opt(Precision, PRECISION), "threads": Opt(Threads, THREADS),
    "max_memory": Opt(MaxMemory, MAX_MEMORY),
    "step": Opt(Step, STEP), "allow_nonfinite": Opt(AllowNonfinite, ALLOW_NONFINITE),
}
#: offered last, in this order, by every probe command
LAST = ("step", "allow_nonfinite")
