"""Words -> token ids with a checkpoint's own tokenizer files.

Looked for in the checkpoint's folder (or the folder of a checkpoint file):
``tokenizer.json``; GPT-2 byte-level BPE as ``vocab.json`` + ``merges.txt`` (or
``encoder.json`` + ``vocab.bpe``); BERT WordPiece ``vocab.txt``. Byte-level BPE words
are encoded with a leading space, the form they take inside running text. A word that
splits into several tokens is left out, with a warning naming its pieces.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from .errors import ProbeError


def _folder(path: str) -> str:
    return path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))


def load_tokenizer(path: str, required: bool = True):
    """(tokenizer, byte_level) for the checkpoint at ``path``; ``None`` when it has no tokenizer
    files and ``required`` is false. Files that exist but cannot be read are a ProbeError."""
    try:
        from tokenizers import Tokenizer
        from tokenizers.implementations import BertWordPieceTokenizer, ByteLevelBPETokenizer
    except ImportError:
        raise ProbeError("--words needs the 'tokenizers' package: pip install tokenizers") from None
    d = _folder(path)
    try:
        j = os.path.join(d, "tokenizer.json")
        if os.path.exists(j):
            tok = Tokenizer.from_file(j)
            tok.no_padding()
            tok.no_truncation()
            byte_level = "ByteLevel" in tok.to_str()[:20000]
            return tok, byte_level
        for vocab, merges in (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe")):
            if os.path.exists(os.path.join(d, vocab)) and os.path.exists(os.path.join(d, merges)):
                return ByteLevelBPETokenizer(os.path.join(d, vocab), os.path.join(d, merges)), True
        v = os.path.join(d, "vocab.txt")
        if os.path.exists(v):
            return BertWordPieceTokenizer(v, lowercase=True), False
    except Exception as exc:  # the tokenizers library raises plain Exceptions on malformed files
        raise ProbeError(f"{d}: cannot read the tokenizer files ({exc})") from None
    if not required:
        return None
    raise ProbeError(f"{d}: no tokenizer files (tokenizer.json, vocab.json + merges.txt, or vocab.txt) "
                     "for --words")


def words_to_ids(path: str, words: list[str], warn=None) -> np.ndarray:
    """Ids of the single-token words, in order; multi-token words are skipped with a warning."""
    tok, byte_level = load_tokenizer(path)
    warn = warn or (lambda msg: print(f"warning: {msg}", file=sys.stderr))
    ids = []
    for w in words:
        w = w.strip()
        if not w:
            continue
        enc = tok.encode((" " + w) if byte_level else w, add_special_tokens=False)
        if len(enc.ids) == 1:
            ids.append(enc.ids[0])
        else:
            warn(f"'{w}' is {len(enc.ids)} tokens ({' '.join(enc.tokens)}); left out")
    if not ids:
        raise ProbeError("none of the --words is a single token of this tokenizer")
    return np.asarray(ids, dtype=np.int64)


def ids_to_text(path: str, ids, warn=None) -> list[str] | None:
    """Text of each token id from the checkpoint's tokenizer files; ``None`` without them, or
    (with a warning) when they cannot be read: the text only labels rows."""
    warn = warn or (lambda msg: print(f"warning: {msg}", file=sys.stderr))
    try:
        got = load_tokenizer(path, required=False)
    except ProbeError as exc:
        warn(f"{exc}; tokens are labelled by id")
        return None
    return None if got is None else [got[0].decode([int(i)]) for i in ids]


def read_words_file(path: str) -> list[str]:
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError as exc:
        raise ProbeError(f"{path}: cannot read words file ({exc.strerror})") from None
    return [w for line in text.splitlines() for w in line.replace(",", " ").split()]
