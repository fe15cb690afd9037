"""Snapshots of any torch model from any training loop, in the toolkit's own file format.

:class:`Recorder` writes what ``probe-train`` writes — the same schema, SWMR appends a live report
follows, checksums, a file a SIGKILL leaves with every earlier snapshot readable — for a model the
toolkit did not build: its weights under the canonical names (``token_embedding``, ``layer0/W_V``)
through the layouts that read external checkpoints, the attention maps of a fixed probe batch, the
token groups and the metrics the loop passes in. Every probe of weights then reads the file with
``--step all``.
"""
from __future__ import annotations

import gc
import json
import math
import os
import re
import time
import weakref
from typing import Callable, Mapping, Sequence

import numpy as np

from .errors import ProbeError, param, warn
from .files import OutputLock, regular_file
from .format import P, Writer
from .format.writer import WriteFailed
from .readers.module import ModelTensors, hf_model

WRITTEN_BY = "probe.Recorder"
_OPEN: set[str] = set()   # the files a Recorder of this process writes (the file lock is per process)


class Recorder:
    """Record ``model`` every ``every`` steps into the snapshot file ``path``.

    Parameters
    ----------
    path : str or os.PathLike
        The snapshot file. An existing one is continued (a resumed loop): its snapshots are kept and
        a step at or before its newest is refused (``resume_from`` drops those after a checkpoint's
        step). ``overwrite=True`` starts it anew.
    model : torch.nn.Module
        Any model whose weights a known layout names (GPT-2, GPT-NeoX, LLaMA, Phi, BERT, nanoGPT and
        the toolkit's own), or any model with ``mapping``.
    every : int
        Record at the steps that are multiples of ``every`` (step 0 included).
    groups : dict of str to sequence, optional
        Token groups, name -> token ids or words (words need ``tokenizer``); what ``--tokens NAME``
        selects.
    tokenizer : optional
        A tokenizer with ``encode`` and ``decode`` (transformers' or the tokenizers library's): turns the words of ``groups`` into
        ids (a byte-level BPE word takes its leading space, its form inside running text) and stores
        each token's text, so that rows are labelled and ``--words`` works on the file.
    probe_inputs : array of int, shape (batch, seq), optional
        A fixed batch whose attention maps each snapshot stores (``probe attention``, ``probe sinks``).
    attention : callable, optional
        ``attention(model, probe_inputs) -> (layers, heads, batch, seq, seq)`` for a model that neither
        returns ``output_attentions`` (Hugging Face) nor has ``attention_maps`` (the toolkit's own).
    mapping : str, optional
        A name-mapping JSON file (as ``--mapping``) for a layout not known.
    metrics : sequence of str, optional
        The metric names a snapshot stores (default: those of the first recorded step, ``loss`` if it
        has none); a later name not among them is left out with a warning, a missing one is NaN.
        ``loss`` is also the snapshot's training loss, ``epoch`` its epoch; ``NAME_loss`` and
        ``NAME_acc`` are split NAME's (``eval_loss``: split ``eval``).
    config : dict, optional
        Anything to keep with the run (γ, learning rate ...), shown by ``probe info``.
    keep : sequence of str, optional
        Shell patterns (``"token_embedding"``, ``"layer*/W_V"``, ``"*.bias"``) over the canonical names
        and the stored parameter names: store only the tensors they match (the token embedding
        always). Default: every tensor, a tied one (GPT-2's output head is its embedding) once.
    resume_from : int, optional
        The step the loop resumes from (the checkpoint it restored): the file's snapshots after it,
        and its step log past it, are dropped and recorded again, as ``probe-train --resume`` does.
        Without it a continued file keeps everything and refuses a step at or before its newest.
    overwrite : bool
        Replace an existing file instead of continuing it.

    Raises
    ------
    ProbeError
        An unknown layout (naming the unmatched parameters), a bad argument, a token group outside the
        model's vocabulary, or a file that is not a snapshot file of this model (other tensors, groups,
        probe batch or metrics); on :meth:`step`, a step that goes backwards or a model resized since.
        A write the file system refuses raises :class:`probe.format.writer.WriteFailed` (a ProbeError) and keeps
        every snapshot before it; the next :meth:`step` reopens the file and goes on.

    Examples
    --------
    >>> import probe
    >>> with probe.Recorder("run.h5", model, every=100, groups={"digits": [15, 16, 17]}) as rec:
    ...     rec.snapshot(0)                           # the initial weights
    ...     for step, batch in enumerate(loader, start=1):
    ...         loss = train_step(model, batch)       # one update
    ...         rec.step(step, loss=loss.item())      # the weights after `step` updates
    """

    def __init__(self, path: str | os.PathLike, model, every: int = 100, *, groups: Mapping | None = None,
                 tokenizer=None, probe_inputs=None, attention: Callable | None = None, mapping: str | None = None,
                 metrics: Sequence[str] | None = None, config: Mapping | None = None,
                 keep: Sequence[str] | None = None, resume_from: int | None = None, overwrite: bool = False):
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:   # (check_number's wording)
            raise ProbeError(f"{param('every', every)}: need an integer at least 1")
        self.path, self.model, self.every = os.fspath(path), model, int(every)
        self.metrics = None if metrics is None else [str(m) for m in metrics]
        self._inputs = None if probe_inputs is None else _int_batch(probe_inputs)
        self._attention_of = attention
        self._config, self._tokenizer = dict(config or {}), tokenizer
        if isinstance(keep, str):
            keep = [keep]
        self._tensors = ModelTensors(model, self.path, mapping, None if keep is None else [str(k) for k in keep])
        vocab = self._tensors.canonical("token_embedding")
        self._groups = {str(k): _ids(str(k), v, tokenizer, vocab[0] if vocab else None)
                        for k, v in (groups or {}).items()}
        self._groups_given = groups is not None
        self._state = {"writer": None}   # what close() and the finalizer share (the finalizer holds no self)
        self._last: int | None = None
        self._reopen = False             # a write failed: the next snapshot reopens the file
        self._dropped: set[str] = set()
        self._losses: list[float] = []   # the loss of each step since the last snapshot: the file's step log
        self._given: list[bool] = []     # whether the loop gave it (a step it did not is NaN, marked 0)
        self._logged = 0                 # the steps the file's log holds (row t: step t)
        self._t0, self._time0 = time.perf_counter(), 0.0
        key = os.path.realpath(self.path)
        if key in _OPEN:
            gc.collect()   # a Recorder nobody holds any more, in a reference cycle: its finalizer frees the path
        if key in _OPEN:
            raise ProbeError(f"{self.path} is being written by another Recorder of this process; close it first")
        self._lock = OutputLock(self.path).acquire()   # one writer per file, as probe-train's
        _OPEN.add(key)
        # the file and its lock belong to the file's writer, not to this object's life: dropped without
        # close() (an exception in the loop's function), it is closed when collected, and the path is free
        self._finalizer = weakref.finalize(self, _close, self._state, self._lock, key)
        try:
            Writer.remove_stale(self.path)
            if os.path.exists(self.path) and not overwrite:
                regular_file(self.path, "snapshot file")
                self._check_continued(metrics is not None, config is not None)   # (before it is rewritten)
                self._open_existing(None if resume_from is None else _step("resume_from", resume_from))
            elif resume_from is not None:
                _step("resume_from", resume_from)
        except BaseException:
            self.close()
            raise

    @property
    def _writer(self) -> Writer | None:
        return self._state["writer"]

    @_writer.setter
    def _writer(self, writer: Writer | None) -> None:
        self._state["writer"] = writer

    def _open_existing(self, upto: int | None) -> None:
        """Reopen the file to go on after its newest snapshot (at or before ``upto``)."""
        self._writer, self._last = Writer.reopen(self.path, upto=upto)
        self._time0 = float(self._writer.last("time") or 0.0)
        held = self._writer.logged_steps
        drop = max(0, held - self._logged) if self._reopen else 0   # (losses the failed write had put there)
        self._losses, self._given = self._losses[drop:], self._given[drop:]
        self._logged = held
        self._t0 = time.perf_counter()

    @property
    def bytes_per_snapshot(self) -> int:
        """What one snapshot adds to the file: every stored tensor as float32 (a tied one once), and the
        probe batch's attention maps (layers x heads x batch x seq x seq float32)."""
        weights = sum(4 * math.prod(s) for s in self._tensors.shapes.values())
        if self._inputs is None:
            return weights
        dims = self._tensors.dims(self._inputs.shape)
        return weights + 4 * dims["layers"] * dims["heads"] * self._inputs.shape[0] * self._inputs.shape[1] ** 2

    def due(self, step: int) -> bool:
        """Whether :meth:`step` records at ``step`` (a multiple of ``every``)."""
        return int(step) % self.every == 0

    def step(self, step: int, **metrics: float) -> bool:
        """Record a snapshot at ``step`` if it is due; returns whether it did. ``metrics``: numbers to keep
        with it (``loss``, ``eval_loss``, ``eval_acc``, ``lr`` ...)."""
        self._log_loss(int(step), metrics)
        return self.snapshot(step, **metrics) if self.due(step) else False

    def _log_loss(self, step: int, metrics: Mapping) -> None:
        """Keep this step's ``loss`` for the step log (``probe dynamics``); a step not passed is NaN there,
        and marked as not given (``step_logged``)."""
        loss = metrics.get("loss", metrics.get("train_loss"))
        at = self._logged + len(self._losses)
        if loss is None or step < at:
            return
        self._losses += [math.nan] * (step - at) + [_number("loss", loss)]
        self._given += [False] * (step - at) + [True]

    def snapshot(self, step: int, **metrics: float) -> bool:
        """Record a snapshot at ``step`` now, due or not (the end of training, say). Returns True."""
        step = int(step)
        if self._last is not None and step <= self._last:
            raise ProbeError(f"{self.path}: step {step} is not after the newest recorded step {self._last} (a loop "
                             "resumed from an earlier checkpoint: record into a new file, or pass overwrite=True)")
        values = {str(k): _number(k, v) for k, v in metrics.items()}
        epoch = values.pop("epoch", math.nan)   # the snapshot's own field, as probe-train's
        params = self._tensors.read()   # (first: a model resized since is refused before anything is written)
        if self._reopen:   # the last write failed and closed the file; it holds every snapshot before
            self._open_existing(None)
            self._reopen = False
        if self._writer is None:
            names = self.metrics if self.metrics is not None else list(values) or ["loss"]   # (step 0: none yet)
            self._create([m for m in names if m != "epoch"])
        known = self._split_of | dict.fromkeys(self._others, None)
        for k in sorted(set(values) - set(known) - self._dropped):
            self._dropped.add(k)
            warn(f"{self.path}: metric '{k}' is not among those recorded ({', '.join(known) or 'none'}); left out "
                 "(name them all with Recorder(metrics=...))")
        split_metrics: dict = {}
        for name, (split, metric) in self._split_of.items():
            split_metrics.setdefault(split, {})[metric] = values.get(name, math.nan)
        try:
            self._writer.append(step=step, epoch=epoch, time=self._time0 + time.perf_counter() - self._t0,
                                train_loss=values.get("loss", values.get("train_loss", math.nan)),
                                params=params, metrics=split_metrics, attention=self._attention(),
                                recorded={k: values.get(k, math.nan) for k in self._others},
                                step_losses=np.asarray(self._losses, dtype=np.float64),
                                step_logged=np.asarray(self._given, dtype=np.uint8))
        except WriteFailed:   # the writer closed the file, whole; a loop that goes on gets it reopened
            self._writer, self._reopen = None, True
            raise
        self._logged += len(self._losses)
        self._losses, self._given = [], []
        self._last = step
        return True

    def close(self) -> None:
        """Close the file; every snapshot written stays. Safe to call twice."""
        self._finalizer()

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- the file -------------------------------------------------------------------------------

    def _create(self, names: list[str]) -> None:
        t = self._tensors
        self._split_of, self._others = _metric_places(names)
        splits = list(dict.fromkeys(["train", *(s for s, _ in self._split_of.values())]))
        inputs = self._inputs if self._inputs is not None else np.zeros((0, 0), dtype=np.int64)
        dims = t.dims(inputs.shape)
        vocab = self._vocab(dims["vocab"])
        task = {"kind": "recorded", "splits": splits, "token_groups": list(self._groups), "metrics": names}
        if t.left_out:   # (schema 1.7: the canonical tensors it was told not to keep are not required)
            task["left_out"] = t.left_out
        config = {**self._config, "recorded_by": WRITTEN_BY, "model": type(self.model).__name__,
                  "layout": t.layout, "every": self.every, "model_config": t.model_config}
        if t.tied:   # stored once, under the tensor it is tied to (the unembedding is its transpose)
            config["tied"] = t.tied
        attention = self._attention()
        self._writer = Writer.create(
            self.path, config=config, task=task, dims=dims, groups=self._groups,
            run_arrays={**vocab, "probe_tokens": inputs, "probe_labels": np.full(len(inputs), -1, np.int64),
                        "probe_split": np.zeros(len(inputs), np.int64), "probe_key_pos": np.zeros(len(inputs), np.int64)},
            params=t.shapes, roles=t.roles, attention_shape=None if attention is None else attention.shape,
            resume_tensors={}, environment=_environment(), recorded=self._others, sparse_log=True)
        self._t0 = time.perf_counter()

    def _check_continued(self, metrics_given: bool, config_given: bool) -> None:
        """The file being continued is a Recorder's, of a model with these tensors, groups, probe batch,
        metrics, interval, config and token texts; what is not given is taken from the file."""
        from .format import Run

        with Run(self.path) as run:
            if run.config.get("recorded_by") != WRITTEN_BY:
                raise ProbeError(f"{self.path}: not a file a Recorder wrote; record into a new file, or pass "
                                 "overwrite=True")
            weights = run.weights()
            canonical = set(weights)
            params = run.h5[P["param"].split("{")[0].rstrip("/")]
            stored: dict[str, tuple] = {}   # every stored parameter by its stored name, and its shape
            params.visititems(lambda n, ds: stored.update({n: tuple(ds.shape[1:])}) if hasattr(ds, "shape") else None)
            names = [str(m) for m in run.task.get("metrics", [])]
            self._split_of, self._others = _metric_places(names)
            batch = np.asarray(run.dataset("probe_tokens")[...])
            groups = dict(run.groups) if self._groups_given else None
            mine = run.own_config
            every, texts = run.config.get("every"), run.token_strings()
        again = "pass the same ones (or none: the file's are used), or record into a new file"
        if batch.size and self._inputs is None:   # the restarted loop goes on with the file's probe batch
            self._inputs = batch
        elif not np.array_equal(batch, self._inputs if self._inputs is not None else batch[:0]):
            raise ProbeError(f"{self.path}: probe_inputs differ from the probe batch it was recorded with; {again}")
        if groups is not None and (groups.keys() != self._groups.keys()
                                   or any(not np.array_equal(groups[g], self._groups[g]) for g in groups)):
            raise ProbeError(f"{self.path}: groups differ from the token groups it was recorded with "
                             f"({', '.join(groups) or 'none'}); {again}")
        if metrics_given and self.metrics != names:
            raise ProbeError(f"{self.path}: metrics {self.metrics} differ from those it records ({names}); {again}")
        self.metrics = names
        here = self._tensors.shapes
        same = all(self._tensors.full.get(c) == tuple(shape) for c, shape in weights.items())
        if same and (canonical != set(self._tensors.roles) or set(here) != set(stored)):   # (another keep=)
            raise ProbeError(f"{self.path}: recorded with other tensors kept ({', '.join(sorted(canonical))}); pass "
                             "the same keep=, or record into a new file")
        for n in sorted(set(here) | set(stored)):
            if stored.get(n) != here.get(n):
                there_, now = stored.get(n, "absent"), here.get(n, "absent")
                raise ProbeError(f"{self.path}: recorded from another model ('{n}' is {there_} there, {now} here); "
                                 "record into a new file, or pass overwrite=True")
        if every != self.every:   # (the file says "every N steps": a snapshot off that grid would belie it)
            raise ProbeError(f"{self.path}: recorded every {every} steps, not every {self.every}; pass every={every}, "
                             "or record into a new file")
        if config_given and json.loads(json.dumps(self._config, default=str)) != mine:
            raise ProbeError(f"{self.path}: config differs from the one it was recorded with ({_shown(mine)}); {again}")
        if self._tokenizer is not None and texts is not None and self._vocab(len(texts)).get("vocab_strings",
                                                                                           []).tolist() != texts:
            raise ProbeError(f"{self.path}: the tokenizer's token texts differ from those it was recorded with; "
                             f"{again}")

    def _vocab(self, vocab: int) -> dict:
        """Each token's text, when a tokenizer is given: rows are labelled, ``--words`` works."""
        tok = self._tokenizer
        if tok is None:
            return {}
        ids = list(range(vocab))
        if hasattr(tok, "convert_ids_to_tokens"):     # transformers
            raw = tok.convert_ids_to_tokens(ids)
        elif hasattr(tok, "id_to_token"):             # the tokenizers library
            raw = [tok.id_to_token(i) for i in ids]
        else:
            raw = [tok.decode([i]) for i in ids]
        # as probe-train stores a text run's: byte-level BPE's space and newline shown as such; a model
        # row past the tokenizer's vocabulary has no text; HDF5 strings hold no NUL
        text = [(t or "").replace("Ġ", " ").replace("Ċ", "\n").replace("\x00", "") for t in raw]
        return {"vocab_ids": np.asarray(ids, dtype=np.int64), "vocab_strings": np.asarray(text, dtype=object)}

    def _attention(self):
        """(layers, heads, batch, seq, seq) attention maps of the probe batch, or None without one."""
        if self._inputs is None:
            return None
        return attention_maps(self.model, self._inputs, self._attention_of)



# --- helpers ------------------------------------------------------------------------------------

_SPLIT_METRIC = re.compile(r"(?:(\w+?)_)?(loss|acc|accuracy)")


def _metric_places(names: list[str]) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """Where each metric goes: ``{name: (split, loss|acc)}`` for the split metrics every run has
    (``loss`` and ``acc``: split ``train``; ``eval_loss``: split ``eval``), the other names (``lr``,
    ``grad_norm``) as recorded metrics of their own."""
    split_of: dict[str, tuple[str, str]] = {}
    others: list[str] = []
    for name in names:
        if not re.fullmatch(r"[\w.-]+", name):
            raise ProbeError(f"metric name '{name}': use letters, digits, '_', '.' or '-'")
        m = _SPLIT_METRIC.fullmatch(name)
        place = (m.group(1) or "train", "acc" if m.group(2) != "loss" else "loss") if m else None
        if place is not None and place not in split_of.values():
            split_of[name] = place
        else:
            others.append(name)
    return split_of, others


def _shown(config: Mapping) -> str:
    text = ", ".join(f"{k}={v}" for k, v in config.items()) or "none"
    return text if len(text) <= 60 else text[:57] + "..."


def _close(state: dict, lock: OutputLock, key: str) -> None:
    """Close a Recorder's file and free its path: at close(), or when the Recorder is collected."""
    try:
        if state["writer"] is not None:
            writer, state["writer"] = state["writer"], None
            writer.close()
    finally:
        _OPEN.discard(key)
        lock.release()


def _step(name: str, value) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
        raise ProbeError(f"{param(name, value)}: need a step, an integer at least 0")
    return int(value)


def _number(name, value) -> float:
    try:
        return float(value.item() if hasattr(value, "item") else value)
    except (TypeError, ValueError):
        raise ProbeError(f"metric '{name}' is {type(value).__name__}, not a number") from None


def _int_batch(x) -> np.ndarray:
    """The probe batch as an int64 (batch, seq) array."""
    a = np.asarray(x.detach().cpu() if hasattr(x, "detach") else x)
    if a.ndim != 2 or a.size == 0 or a.dtype.kind not in "iu":
        raise ProbeError(f"{param('probe_inputs')} is token ids of shape (batch, seq); got {a.dtype} of shape "
                         f"{a.shape}")
    return a.astype(np.int64)


def _ids(name: str, values, tokenizer, vocab: int | None = None) -> np.ndarray:
    """A group's token ids: its ids, and its words turned into one id each by ``tokenizer``; each must be
    a row of the model's token embedding (``vocab`` rows)."""
    ids = []
    for v in values:
        if isinstance(v, str):
            if tokenizer is None:
                raise ProbeError(f"token group '{name}' lists words ('{v}'): pass tokenizer= to turn them into ids")
            ids.extend(_word_id(tokenizer, v))
        elif isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            ids.append(int(v))
        else:
            raise ProbeError(f"token group '{name}': '{v}' is neither a token id nor a word")
    if not ids:
        raise ProbeError(f"token group '{name}' holds no token")
    outside = [i for i in ids if vocab is not None and not 0 <= i < vocab]
    if outside:
        raise ProbeError(f"token group '{name}': token id {outside[0]} is outside the model's vocabulary of {vocab} "
                         f"tokens (0 to {vocab - 1})" + (f"; {len(outside) - 1} more" if len(outside) > 1 else ""))
    return np.asarray(ids, dtype=np.int64)


def _word_id(tokenizer, word: str) -> list[int]:
    """The one id of ``word`` (with the leading space of running text where that is one token, as a
    byte-level BPE encodes it); a word of several tokens is left out with a warning."""
    for form in (" " + word.strip(), word.strip()):
        enc = tokenizer.encode(form, add_special_tokens=False)
        ids = list(getattr(enc, "ids", enc))   # (the tokenizers library's Encoding, or transformers' list)
        if len(ids) == 1:
            return ids
    warn(f"'{word}' is not one token of this tokenizer; left out")
    return []


def _environment() -> dict:
    import platform

    import h5py
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
            "h5py": h5py.__version__, "threads": torch.get_num_threads()}


def attention_maps(model, inputs: np.ndarray, attention: Callable | None = None) -> np.ndarray:
    """(layers, heads, batch, seq, seq) attention probabilities of ``model`` over ``inputs`` (batch, seq),
    in eval mode without gradients (the model's mode is restored): ``attention(model, inputs)``, else
    the toolkit's models' ``attention_maps``, else a Hugging Face model's ``output_attentions``."""
    import torch

    was = model.training
    device = next(model.parameters()).device
    x = torch.as_tensor(inputs, device=device)
    model.eval()
    try:
        with torch.no_grad():
            if attention is not None:
                maps = attention(model, x)
            elif callable(getattr(model, "attention_maps", None)):
                maps = model.attention_maps(x)
            elif hf_model(model) is not None:   # a Hugging Face model, or one a Lightning module wraps
                out = hf_model(model)(input_ids=x, output_attentions=True)
                att = getattr(out, "attentions", None)
                if not att or any(a is None for a in att):
                    raise ProbeError("the model returned no attention maps for probe_inputs: its attention runs "
                                     "fused (sdpa); load it with attn_implementation='eager' (or call "
                                     "model.set_attn_implementation('eager')), or pass attention=")
                maps = torch.stack(att).transpose(1, 2)   # (layers, batch, heads, q, k) -> heads first
            else:
                raise ProbeError("a model that returns no attention maps: pass attention=(model, inputs) -> "
                                 "(layers, heads, batch, seq, seq), or no probe_inputs")
    finally:
        model.train(was)
    maps = np.asarray(maps.float().cpu() if hasattr(maps, "cpu") else maps, dtype=np.float32)
    if maps.ndim != 5 or maps.shape[2:] != (inputs.shape[0], inputs.shape[1], inputs.shape[1]):
        raise ProbeError(f"attention maps of shape {maps.shape}; expected (layers, heads, {inputs.shape[0]}, "
                         f"{inputs.shape[1]}, {inputs.shape[1]})")
    return maps
