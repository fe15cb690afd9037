"""What the probes' API functions share: the token selection, argument checks, reading rows at
the selected steps, the non-finite policy (:class:`Finite`), passing warnings on, and the forward
pass of a checkpoint over a text."""
from __future__ import annotations

import math
import os
import re
import warnings

import numpy as np

from .. import registry
from .._limits import FLOAT64, WHY, check
from ..analyses._stats import finite_rows, nonfinite
from ..analyses.base import Results, TokenTexts
from ..docstrings import fill
from ..params import check_number
from ..errors import ProbeError, ProbeWarning, param
from ..format import Run, read_rows
from ..readers.source import open_source, token_texts, word_ids
from ..readers.tokens import parse_tokens
from ..readers.words import ids_to_text, word_list


def select_tokens(run, tokens=None, *, words=None, words_file: str | None = None,
                  tensor: str = "token_embedding", probe: str = "similarity") -> tuple[np.ndarray | None, list[str]]:
    """The token ids a selection names, checked against the rows of ``tensor``.

    The one parser of the probes' ``tokens`` / ``words`` / ``words_file`` arguments.

    Parameters
    ----------
    run : Run or CheckpointRun
        An open source: [`Run`][probe.format.run.Run] for a snapshot file, or what
        ``probe.readers.source.open_source`` gives for a checkpoint.
    {tokens}
    {words}
    {words_file}
    {tensor}
    probe : str, default "similarity"
        The probe whose default selection applies when nothing is chosen.

    Returns
    -------
    ids : ndarray of int, shape (k,), or None
        The selected ids, in order of appearance, duplicates dropped; ``None`` when the probe's default
        is every row.
    labels : list of str, length k
        The group each id was chosen by (``""`` for plain ids and words).

    Raises
    ------
    ProbeError
        Both ``tokens`` and ``words``; an unknown group; no word found (a word not found is left out with
        a ``ProbeWarning``); an id outside the rows of ``tensor``; an empty selection.

    Examples
    --------
    >>> from probe.format import Run
    >>> from probe.api import select_tokens
    >>> with Run("run.h5") as run:
    ...     ids, labels = select_tokens(run, "reasoning,3,5")
    """
    rows = run.tensor(tensor).shape[1]
    wl = word_list(words, words_file)
    if wl:
        if tokens is not None:
            raise ProbeError(f"give {param('tokens')} or {param('words')}, not both")
        ids = word_ids(run, wl)
        bad = ids[(ids < 0) | (ids >= rows)]
        if bad.size:
            raise ProbeError(f"word token id(s) {', '.join(map(str, bad[:5]))} outside the rows of {tensor} "
                             f"(0..{rows - 1})")
        return ids, [""] * len(ids)
    if tokens is None:
        tokens = registry.default_tokens(probe)
        if tokens is None:
            return None, []
        missing = [g for g in tokens.split(",") if g not in run.groups]
        if missing:
            known = ", ".join(sorted(run.groups)) or "none"
            raise ProbeError(f"{run.path}: has no token group '{missing[0]}' (the default selection); choose "
                             f"tokens with {param('tokens')} or {param('words')} (groups here: {known})")
    # a selection refused by the memory budget before its ids are made: its rows could not be read
    return parse_tokens(tokens, run.groups, rows, lambda n: check_fits(run.tensor(tensor), 1, range(n)))


select_tokens.__doc__ = fill(select_tokens.__doc__, "", "the default selection of probe ``probe`` (``None`` where "
                             "that is every row)", "", select_tokens)


def check_enough(ids, need: int, what: str) -> None:
    if ids is not None and len(ids) < need:
        raise ProbeError(f"{what} needs at least {need} tokens; the selection has {len(ids)}")


def read_at(ds, indices: list[int], rows=None, work: float = 0) -> list[np.ndarray]:
    """ds at each snapshot index (optionally only ``rows``); one read when the indices are contiguous. What
    is read, and ``work`` times one snapshot of it in float32 for what the math holds besides
    (``_limits.DECOMPOSITION``...), must fit the memory budget: checked first (:func:`check_fits`)."""
    check_fits(ds, len(indices), rows, work)
    if len(indices) > 1 and indices == list(range(indices[0], indices[-1] + 1)):
        sl = slice(indices[0], indices[-1] + 1)
        return list(ds[sl] if rows is None else read_rows(ds, sl, rows))
    return [ds[i] if rows is None else read_rows(ds, i, rows) for i in indices]


def check_fits(ds, steps: int, rows=None, work: float = 0) -> None:
    """The memory budget's check of reading ``rows`` (None: all) of ``ds`` (a snapshot file's dataset or a
    checkpoint's tensor, axis 0 the snapshot) at ``steps`` snapshots, with ``work`` more (see :func:`read_at`)."""
    one = ((len(rows),) + tuple(ds.shape[2:])) if rows is not None else tuple(ds.shape[1:])
    count = math.prod(one)
    where = getattr(ds, "path", None) or ds.file.filename
    at = (f" ({len(rows)} of its {ds.shape[1]} rows)" if rows is not None else "") + \
        (f" at {steps} steps" if steps > 1 else "")
    check(where, ds.name.lstrip("/"), one if steps == 1 else (steps, *one), ds.dtype.name, ds.dtype.itemsize,
          need=count * (steps * ds.dtype.itemsize + 4 * work), why=WHY, at=at)


def read_whole(ds, work: float = 0) -> np.ndarray:
    """All of ``ds``, a dataset with no snapshot axis (the task's P^s, the probe batch), checked against the
    memory budget first (``work``: as for :func:`read_at`)."""
    check(ds.file.filename, ds.name.lstrip("/"), ds.shape, ds.dtype.name, ds.dtype.itemsize,
          need=math.prod(ds.shape) * (ds.dtype.itemsize + 4 * work), why=WHY)
    return np.asarray(ds[...])


def preflight(path, source, names, work: float) -> None:
    """The memory budget's check of each raw tensor ``names`` of a checkpoint ``source`` (its header's shapes
    and dtypes), read as float32 with ``work`` times that more, before any is read."""
    shapes, dtypes = source.shapes(), source.dtypes()
    for n in names:
        dtype = dtypes.get(n, "float32")
        bits = re.search(r"\d+", dtype)      # f32, bf16, float16, f8_e4m3 (safetensors' and torch's names)
        check(path, n, shapes[n], _LONG.get(dtype, dtype), int(bits.group()) // 8 if bits else 1,
              need=math.prod(shapes[n]) * 4 * (1 + work), why=WHY)


_LONG = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16"}   # safetensors' short names


def group_of(groups: dict, ids: np.ndarray, labels: list[str]) -> list[str]:
    """Group of each id: the group that selected it, else the first of ``groups`` holding it, else ''."""
    return [lab or next((g for g, v in groups.items() if i in v), "") for i, lab in zip(ids, labels)]


def with_warnings(results: list) -> Results:
    """Pass each result's warnings on to the caller (once per distinct message); the results as
    :class:`~probe.analyses.base.Results` (a list with ``to_frame()``), as every probe returns them."""
    for msg in dict.fromkeys(w for r in results for w in r.warnings):
        # at the caller's line: past this helper, the probe and its budgeted wrapper (probe._limits.budgeted)
        warnings.warn(msg, ProbeWarning, stacklevel=4)
    return Results(results)


# --- non-finite input ----------------------------------------------------------------------------
# Every probe checks what it read (np.isfinite on the arrays in hand; nothing is read twice). By default a
# NaN or inf is an error naming the file, the tensor, the step and the counts; with ``allow_nonfinite`` the
# probe computes on the finite part, by its own rule, and one warning per tensor says so:
#   token vectors (similarity, pca, theory, condense, align's embedding, rank's embedding): the rows
#     holding a non-finite value are left out;
#   weight matrices in an SVD or eigen-decomposition (spectrum, rank, condense's singular values): the
#     matrix is left out; align's own W_V and W_O: their non-finite entries are taken as 0;
#   condense's neuron weights: the neurons holding one are left out;
#   attention maps and residual norms (attention, sinks): the probe sequences holding one are left out;
#   norm statistics (norms): the sites holding one; per-split losses (bias): the steps holding one;
#   the per-step loss log (dynamics): the log is cut before its first non-finite loss;
#   per-token losses and entropies (tokens): the tokens holding one;
#   ood: the weights are used as they are, and the sequences whose logits are not finite are left out
#     of each split's loss and accuracy. Non-finite logits (possible from finite weights: a forward pass
#     that overflows) are an error without ``allow_nonfinite``.

_ALLOW = param("allow_nonfinite", True)


class Finite:
    """The non-finite check of one probe call on one file (see above). ``check(name, X, step, action)``
    returns None when X is finite, else (with ``allow``) the boolean mask of its finite values and
    remembers the finding; :meth:`warn` then says, once per tensor and action, what was left out."""

    def __init__(self, path, allow: bool):
        self.path, self.allow = os.fspath(path), bool(allow)
        self._found: dict[tuple[str, str], list[tuple]] = {}

    def facts(self, name: str, found: list[tuple]) -> str:
        nan, inf = sum(f[1] for f in found), sum(f[2] for f in found)
        steps = list(dict.fromkeys(f[0] for f in found if f[0] is not None))
        counts = f"{nan + inf} non-finite value{'' if nan + inf == 1 else 's'} (NaN {nan}, inf {inf})"
        if len(steps) <= 1:
            at = f" at step {steps[0]}" if steps else ""
            detail = found[0][3] if len(found) == 1 and len(found[0]) > 3 else ""
            return f"{self.path}: {name}{at} has {counts}{detail}"
        shown = ", ".join(map(str, steps[:6])) + (", ..." if len(steps) > 6 else "")
        return f"{self.path}: {name} has {counts} at {len(steps)} steps ({shown})"

    def __call__(self, name: str, X, step=None, action: str = "") -> np.ndarray | None:
        ok, nan, inf = nonfinite(X)
        if ok is not None:
            self.report(name, step, nan, inf, action)
        return ok

    def report(self, name: str, step, nan: int, inf: int, action: str, detail: str = "") -> None:
        """A finding (``detail``: words after the counts): the error, or (allowed) remembered for :meth:`warn`."""
        if not self.allow:
            raise ProbeError(f"{self.facts(name, [(step, nan, inf, detail)])}; pass {_ALLOW} to compute on the "
                             "finite part")
        self._found.setdefault((name, action), []).append((step, nan, inf, detail))

    def rows(self, name: str, X: np.ndarray, step, ids=None) -> np.ndarray | None:
        """None when X (k, ...) is finite; else the (k,) mask of its finite rows (the tokens ``ids``, else
        rows 0..k-1, holding a non-finite value are named as left out)."""
        ok, nan, inf = nonfinite(X)
        if ok is None:
            return None
        keep = finite_rows(ok)
        gone = np.flatnonzero(~keep) if ids is None else np.asarray(ids)[~keep]
        shown = ", ".join(str(int(i)) for i in gone[:8]) + (", ..." if gone.size > 8 else "")
        self.report(name, step, nan, inf, f"token(s) {shown} left out")   # one pass over X, not two
        return keep

    def warn(self) -> None:
        for (name, action), found in self._found.items():
            warnings.warn(f"{self.facts(name, found)}; {action}", ProbeWarning, stacklevel=4)   # (as with_warnings's)
        self._found.clear()


def tensor_name(run, name: str) -> str:
    """``name`` with the checkpoint's own tensor name(s) it is built from, where they differ."""
    rules = getattr(getattr(getattr(run, "reader", None), "layout", None), "rules", {})
    raw = tuple(rules.get(name, ((),))[0])
    return f"{name} ({', '.join(raw)})" if raw and raw != (name,) else name


def step_at(run, i: int) -> int | None:
    """The step of snapshot ``i`` for messages; a checkpoint's own step, or None when it has none."""
    source = getattr(run, "source", None)
    return int(run.steps[i]) if source is None else source.step


def _at(step) -> str:
    return "" if step is None else f"at step {step} "


def unconverged(path, what: str, step, exc: Exception) -> ProbeError:
    detail = " ".join(str(exc).split()) or type(exc).__name__
    return ProbeError(f"{os.fspath(path)}: {what} {_at(step)}did not converge ({detail})")


def finite_tokens(check: Finite, name: str, X: np.ndarray, step, ids, labels, need: int, what: str):
    """(X, ids, labels) without the rows of X (k, d) that hold a non-finite value (an error unless
    allowed); at least ``need`` rows must remain."""
    keep = check.rows(name, X, step, ids)
    if keep is None:
        return X, ids, labels
    if keep.sum() < need:
        raise ProbeError(f"{check.facts(name, [(step, *nonfinite(X)[1:])])}: {what} needs at least {need} tokens "
                         f"with finite values; {int(keep.sum())} left")
    return X[keep], np.asarray(ids)[keep], [l for l, k in zip(labels, keep) if k]


def layer_check(run, layer: int, head: int | None = None) -> None:
    layers = int(run.dims.get("layers", 0))
    if layers == 0:
        raise ProbeError(f"{run.path}: the model has no attention layers")
    if not 0 <= layer < layers:
        raise ProbeError(f"{param('layer', layer)} out of range: the model has layers 0..{layers - 1}")
    if head is not None and run.dims.get("heads", 1) is None:   # a lone weights file
        from ..readers.layouts import needs_heads

        raise needs_heads(run.path, run.reader.layout.name, "a probe of one attention head")
    heads = int(run.dims.get("heads", 1))
    if head is not None and not 0 <= head < heads:
        raise ProbeError(f"{param('head', head)} out of range: the model has heads 0..{heads - 1}")


def neuron_matrix(W: np.ndarray) -> np.ndarray:
    """Neuron input-weight vectors of an x @ W tensor: (in, out) -> (out, in); per head (H, in, e) -> (H*e, in)."""
    if W.ndim == 3:
        return np.concatenate([w.T for w in W])
    if W.ndim == 2:
        return W.T
    raise ProbeError(f"cannot group neurons of a {W.ndim}-D tensor")


def finite_sequences(check: Finite, name: str, A: np.ndarray, step, axis: int = 2, also=None) -> np.ndarray | None:
    """None when the maps A (layers, heads, B, T, T) (and ``also``, (blocks, B, T) residual norms, if
    given) are finite; else (allowed) the (B,) mask of the probe sequences finite in both."""
    keep = None
    for n, X, ax in [(name, A, axis)] + ([] if also is None else [(*also, 1)]):
        ok = check(n, X, step, "the probe sequences holding them left out")
        if ok is not None:
            k = np.moveaxis(ok, ax, 0).reshape(ok.shape[ax], -1).all(axis=1)
            keep = k if keep is None else keep & k
    if keep is not None and not keep.any():
        raise ProbeError(f"{check.path}: {_at(step)}no probe sequence has finite attention maps"
                         f"{' and residual norms' if also is not None else ''}")
    return keep


def as_matrix(name: str, W: np.ndarray) -> np.ndarray:
    """Per-head tensors back to the full linear map: (H, d, e) -> (d, H*e); W_O (H, e, d) -> (H*e, d)."""
    if W.ndim == 3:
        if name.endswith("W_O"):
            return W.reshape(-1, W.shape[-1])
        return W.transpose(1, 0, 2).reshape(W.shape[1], -1)
    return W


def natural(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def matrix_names(run) -> list[str]:
    """A snapshot file's weight matrices (2-D, or per-head 3-D) by the names every probe uses: the
    canonical ones of its ``weights/`` group (``layer0/W_K``, ``token_embedding``; links to the
    parameters), and the parameter name only for a matrix with no canonical name (the Emb-MLP's
    ``W_1``); in natural order (layer 2 before layer 10)."""
    canonical = [n for n, shape in run.weights().items() if len(shape) >= 2]
    linked = {run.tensor(n).id for n in canonical}    # a canonical name is a hard link: the same object
    own = [n for n in run.weight_matrices() + [n for n in ("W_E", "W_pos", "W_U") if n in run.tensors()]
           if run.tensor(n).id not in linked]
    return sorted(dict.fromkeys(canonical + own), key=natural)


# --- paper 4: norms, sinks, rank, tokens ---------------------------------------------------------

WINDOW, MAX_TOKENS = 128, 4096


def forward(path: str, text: str | None, what: str, step, *, window: int, max_tokens: int, attention: bool = False):
    """A checkpoint run over ``text`` (the probes that need activations, on external checkpoints)."""
    from ..readers.activations import run_text
    from ..readers.checkpoints import open_checkpoint

    if not os.path.exists(path) and not path.startswith("hf:"):
        raise ProbeError(f"{path}: no such file or folder")
    open_checkpoint(path)   # a clear error for anything that is no readable checkpoint at all
    if text is None:
        raise ProbeError(f"{path}: {what} on a checkpoint needs activations: pass {param('text')} FILE, a text "
                         "file to run the model on (its tokenizer files are used)")
    if str(step) not in ("latest", "all"):
        raise ProbeError(f"{path}: a checkpoint holds one step; use {param('step', 'latest')}")
    check_number("window", window)
    check_number("max_tokens", max_tokens)
    return run_text(path, text, window=window, max_tokens=max_tokens, attention=attention)


def text_only_for_checkpoints(path, text) -> None:
    if text is not None:
        warnings.warn(f"{path}: {param('text')} is for external checkpoints; a snapshot file stores what it needs "
                      "(ignored)", ProbeWarning, stacklevel=4)


def finite_sites(check: Finite, step, sites: list[str], ms, gain, med, where: str):
    """(sites, mean_square, gain, median_square) of the norm sites whose numbers are all finite (an
    error unless allowed; a gain already reported non-finite is NaN here and not named again)."""
    bad = np.zeros(len(sites), bool)
    for name, x in (("norm_ms", ms), ("norm_ms_median", med)):
        if x is not None:
            ok = check(name + where, x, step, "the sites holding them left out")
            if ok is not None:
                bad |= ~ok
    if gain is not None:
        bad |= ~np.isfinite(np.asarray(gain, dtype=np.float64))
        if where:   # a checkpoint: the gains come from the model run, named here
            ok = check("norm gains" + where, gain, step, "the sites holding them left out")
    if not bad.any():
        return sites, ms, gain, med
    if bad.all():
        raise ProbeError(f"{check.path}: {_at(step)}no norm site has finite statistics")
    keep = ~bad
    return ([s for s, k in zip(sites, keep) if k], np.asarray(ms)[keep],
            None if gain is None else np.asarray(gain)[keep], None if med is None else np.asarray(med)[keep])


def finite_tokens_of(checks: tuple, arrays: list[tuple], where: str) -> np.ndarray | None:
    """None when every per-token array is finite; else (allowed) the mask of the tokens finite in all.
    ``arrays``: (0 for run A or 1 for run B, name, values (any shape, N values), step)."""
    keep = None
    for which, name, x, step in arrays:
        ok = checks[which](name + where, x, step, "the tokens holding them left out")
        if ok is not None:
            keep = ok.ravel() if keep is None else keep & ok.ravel()
    if keep is not None and not keep.any():
        raise ProbeError(f"{checks[0].path}: no token has a finite loss, entropy and surprisal in both models")
    return keep


def _texts_of(run, ids):
    """The texts of ``ids`` (a :class:`~probe.analyses.base.TokenTexts`) while ``run`` is open: a text
    run's stored vocabulary now; a checkpoint's tokenizer files when the texts are first asked for."""
    if isinstance(run, Run):
        return TokenTexts(token_texts(run, ids))
    path, ids = run.path, [int(i) for i in ids]
    return TokenTexts(load=lambda: ids_to_text(path, ids))


class TokenRows:
    """The chosen rows of a tensor at each selected step, read while the source was open: what
    similarity, pca and cohesion analyse. :meth:`finite` gives step k's rows without those holding a
    NaN or inf (an error unless allowed), with their ids and labels."""

    def __init__(self, run, tokens, words, words_file, tensor: str, step, allow_nonfinite: bool, probe: str,
                 need: int, what: str, work: float = FLOAT64):
        """``work``: what the math holds besides the rows, in multiples of them (see :func:`read_at`)."""
        self.ids, self.labels = select_tokens(run, tokens, words=words, words_file=words_file, tensor=tensor,
                                              probe=probe)
        check_enough(self.ids, need, what)
        indices = run.step_indices(step)
        self.vectors = read_at(run.tensor(tensor), indices, self.ids, work)
        self.steps = [int(run.steps[i]) for i in indices]
        self.at = [step_at(run, i) for i in indices]
        self.check, self.name = Finite(run.path, allow_nonfinite), tensor_name(run, tensor)
        self.texts = _texts_of(run, self.ids)
        self.need, self.what, self._run_groups = need, what, dict(run.groups)

    def group_of(self) -> list[str]:
        """The group of each id: the one that selected it, else the first stored group holding it, else ''."""
        return group_of(self._run_groups, self.ids, self.labels)

    def finite(self, k: int, labels: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(rows (n, d), their ids, their ``labels``) at step ``k``, the non-finite rows left out."""
        return finite_tokens(self.check, self.name, self.vectors[k].reshape(len(self.ids), -1), self.at[k],
                              self.ids, labels, self.need, self.what)

    def texts_of(self, sel: np.ndarray):
        """The texts of the kept ids ``sel`` (lazy for a checkpoint: :class:`~probe.analyses.base.TokenTexts`)."""
        return self.texts.subset(np.isin(self.ids, sel))


def token_vectors(path, tokens=None, *, words=None, words_file: str | None = None, tensor: str = "token_embedding",
                  step: str | int = "latest", groups: str | None = None, mapping: str | None = None,
                  allow_nonfinite: bool = False, probe: str = "") -> list[tuple[int, np.ndarray]]:
    """The selected token vectors at each selected step: what a probe of token vectors starts from (one in
    another package, too).

    Opens ``path`` (any source), selects the tokens as every probe does (``tokens``, ``words``,
    ``words_file``; ``None``: probe ``probe``'s default selection), reads only their rows of ``tensor`` at
    the ``step`` selection, and checks them: a row holding NaN or inf is an error, or with
    ``allow_nonfinite`` left out with a ``ProbeWarning``.

    Returns
    -------
    list of (int, ndarray of shape (k, d))
        (step, the rows) per selected step.
    """
    with open_source(path, groups, mapping) as run:
        rows = TokenRows(run, tokens, words, words_file, tensor, step, allow_nonfinite, probe, 1, "the probe")
    out = [(s, rows.finite(k, rows.labels)[0]) for k, s in enumerate(rows.steps)]
    rows.check.warn()
    return out
