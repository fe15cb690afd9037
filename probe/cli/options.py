"""Every shared option of the ``probe`` CLI, declared once.

An option is named like the API parameter it feeds (``--top-k`` -> ``top_k``) and its default
is that parameter's default (``tests/test_cli_options.py`` checks both against
:mod:`probe.api`), so ``probe <cmd> --help`` says the same thing for the same concept in every
command. Defaults live here as constants because ``Annotated`` options take them from the
signature: ``step: Step = STEP``.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Callable, Optional

import typer


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


# --- arguments ---------------------------------------------------------------------------------
File = Annotated[str, typer.Argument(help="snapshot file (.h5) written by probe-train", show_default=False)]
Source = Annotated[str, typer.Argument(
    help="snapshot file, or a checkpoint: Hugging Face folder, .safetensors, .pt/.pth/.bin state dict, "
         "nanoGPT ckpt.pt, or a hub model hf:ORG/NAME[@REVISION]", show_default=False)]

# --- output ------------------------------------------------------------------------------------
FORMAT = Format.table
Fmt = Annotated[Format, typer.Option("--format", "-f", help="table, json (strict: no NaN) or csv "
                                     "(tidy: step,metric,key,value); data on stdout, logs on stderr")]
Plot = Annotated[Optional[str], typer.Option(help="write a figure to this .png/.pdf/.svg")]
Out = Annotated[Optional[str], typer.Option(
    "--out", "-o", help="where results go. batch: a .csv or .json table (re-running skips what it holds; "
                        "default: stdout); figures: a folder (default: figures); report: the .html page "
                        "(default: report.html)")]

# --- what to read ------------------------------------------------------------------------------
STEP = "latest"
Step = Annotated[str, typer.Option("--step", "-s", help="latest, all, a step number, A:B (steps in [A, B)) or a comma list of these")]
Tokens = Annotated[Optional[str], typer.Option(
    "--tokens", "-t", help="group names (reasoning, memory, keys), ids 3,5,7 or a half-open range 11:21 "
                           "[default: similarity, theory: reasoning; pca: keys,reasoning,memory; condense: "
                           "every row]")]
Words = Annotated[Optional[str], typer.Option(
    help="comma-separated words instead of --tokens, looked up in a text run's vocabulary or the "
         "checkpoint's tokenizer files (multi-token words are left out with a warning)")]
WordsFile = Annotated[Optional[str], typer.Option(help="file of words (one per line or comma-separated)")]
TENSOR = "token_embedding"
Tensor = Annotated[str, typer.Option(help="tensor whose rows are the token vectors (see probe info)")]
Groups = Annotated[Optional[str], typer.Option(help="JSON/YAML file: group name -> token ids or words "
                                                    "(adds --tokens names)")]
def _probes_help() -> str:
    from .. import registry as R

    def listed(*reads):
        return ", ".join(R.names("batch", reads))

    extra = ", ".join(n for n in R.names("report") if n not in R.names("batch"))
    return (f"probe to run (repeat for several): {listed(R.WEIGHTS)}; {listed(R.ACTIVATIONS)} (checkpoints: with "
            f"--text); on snapshot files also {listed(R.SNAPSHOT)} (report: also {extra}; default: every probe "
            "that applies)")


Probes = Annotated[list[str], typer.Option("--probe", "-p", help=_probes_help(), show_default=False)]
Revisions = Annotated[Optional[str], typer.Option(
    help="hub sources (hf:ORG/NAME): a comma list of revisions (step1000,step2000) or all (every branch and "
         "tag, in step order); HF_HUB_OFFLINE=1 reads the local hub cache only")]
Mapping = Annotated[Optional[str], typer.Option(help="JSON name-mapping file for an unknown checkpoint layout")]
Layer = Annotated[Optional[int], typer.Option("--layer", "-l", help="attention layer, 0-based [default: align: 0; "
                                              "attention: every layer]")]
Head = Annotated[Optional[int], typer.Option(help="attention head, 0-based [default: 0]")]

ALLOW_NONFINITE = False
AllowNonfinite = Annotated[bool, typer.Option(
    help="compute on the finite part of what holds NaN or inf (rows, matrices, sequences or steps left out, "
         "each probe by its rule; one warning line says what) instead of stopping with an error")]

# --- probe settings ----------------------------------------------------------------------------
TOP_K = 3
TopK = Annotated[int, typer.Option(min=1, help="align: top singular vectors of W_V compared with the embeddings")]
N_COMPONENTS = 3
NComponents = Annotated[int, typer.Option(min=1, help="pca: principal components to report")]
NEURONS = "layer0/W_Q"
Neurons = Annotated[str, typer.Option(help="condense: weight whose neurons are grouped by cosine ('': none)")]
THRESHOLD = 0.7
Threshold = Annotated[float, typer.Option(help="condense: cosine above which two neurons are grouped")]
Anchor = Annotated[Optional[int], typer.Option(help="theory: s0 of the cos(w(s0), w(s_j)) profile "
                                               "[default: the middle token]")]
Dim = Annotated[Optional[int], typer.Option(help="theory: length of the eq. 14 vectors [default: vocabulary size]")]
SEED = 0
Seed = Annotated[int, typer.Option(help="theory: seed of the eq. 14 noise")]
FULL = False
Full = Annotated[bool, typer.Option(help="ood: every sequence of each split, not the logged subset")]
Splits = Annotated[Optional[list[str]], typer.Option(
    help="bias: split A then split B (give twice) [default: the task's pair: anchor mem, rsn_train; "
         "lm story, logic]")]

PRECISION = "float64"
Precision = Annotated[str, typer.Option(help="spectrum: precision of the Gram matrix, float64 (WeightWatcher's values "
                                        "to machine precision) or float32 (about twice as fast, ~1e-6 relative)")]

THREADS = 0
Threads = Annotated[int, typer.Option(min=0, help="spectrum: layers, ood: snapshots analysed at once, one BLAS/torch "
                                      "thread each (0: one per CPU core; batch with --jobs gives each worker 1)")]

# --- paper 4 ---------------------------------------------------------------------------------
SATURATION = 0.1
Saturation = Annotated[float, typer.Option(help="norms: ε share s = ε / (m + ε) from which a norm site counts as "
                                           "saturated (0.1: its output rms is <= 95 % of a clean norm's)")]
MIN_QUERY = 4
MinQuery = Annotated[int, typer.Option(min=1, help="sinks: first query position counted (earlier queries see "
                                       "little besides position 0)")]
SINK_THRESHOLD = 0.3
SinkThreshold = Annotated[float, typer.Option(help="sinks: mean attention on position 0 from which a head counts "
                                              "as a sink head")]
Text = Annotated[Optional[str], typer.Option(help="checkpoints: a text file to run the model on (norms, sinks and "
                                             "tokens need activations; the checkpoint's tokenizer files are used)")]
WINDOW = 128
Window = Annotated[int, typer.Option(min=2, help="with --text: tokens per window the model sees")]
MAX_TOKENS = 4096
MaxTokens = Annotated[int, typer.Option(min=2, help="with --text: at most this many tokens of the text")]
BUCKETS = 4
Buckets = Annotated[int, typer.Option(min=1, help="tokens: quantile buckets per token feature")]
StepB = Annotated[Optional[str], typer.Option(help="tokens: step of run B (default: its latest step, or with --step "
                                              "all / A:B / N the same steps as run A); with one file, the second "
                                              "step to compare")]

DELTA = 0.5
Delta = Annotated[float, typer.Option(help="dynamics: the loss has escaped once it is below ln V minus this (nats)")]
SMOOTH = 10
Smooth = Annotated[int, typer.Option(min=1, help="dynamics: steps averaged for the escape test")]
SPIKE_FACTOR = 1.3
SpikeFactor = Annotated[float, typer.Option(help="dynamics: a spike is a loss above this many times the running "
                                            "median")]
SPIKE_WINDOW = 50
SpikeWindow = Annotated[int, typer.Option(min=1, help="dynamics: steps in the running median")]

# --- sweeps -------------------------------------------------------------------------------------
Metric = Annotated[Optional[list[str]], typer.Option(
    help="number per run (repeat): acc[SPLIT], loss[SPLIT], train_loss, or PROBE:NAME such as "
         "similarity:distance_corr or pca:order_pc1[reasoning], the probe's options in brackets: "
         "similarity(tokens=logic):mean_offdiag [default: every logged accuracy]")]
Outcome = Annotated[Optional[list[str]], typer.Option(
    help="binary outcome per run (repeat): A>B, A<B, A>=B or A<=B with metrics or numbers "
         "[default: composite acc[ood_inferential]>acc[ood_symmetric]; anchor acc[rsn_test]>0.5]")]

# --- running -----------------------------------------------------------------------------------
JOBS = 0
Jobs = Annotated[int, typer.Option("--jobs", "-j", min=0, help="processes at once; 0: automatic (batch: one "
                                   "process whose BLAS uses every core; figures: one training run per CPU core)")]

# --- arguments of one probe ----------------------------------------------------------------------
Other = Annotated[Optional[str], typer.Argument(help="run B (default: FILE again, at --step-b)", show_default=False)]


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
    "step": Opt(Step, STEP), "allow_nonfinite": Opt(AllowNonfinite, ALLOW_NONFINITE),
}
#: offered last, in this order, by every probe command
LAST = ("step", "allow_nonfinite")
