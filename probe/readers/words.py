"""Words -> token ids with a checkpoint's own tokenizer files.

Looked for in the checkpoint's folder (or the folder of a checkpoint file):
``tokenizer.json``; GPT-2 byte-level BPE as ``vocab.json`` + ``merges.txt`` (or
``encoder.json`` + ``vocab.bpe``); BERT WordPiece ``vocab.txt``. Byte-level BPE words
are encoded with a leading space, the form they take inside running text. A word that
splits into several tokens is left out, with a warning naming its pieces.
"""
from __future__ import annotations

import os

import numpy as np

from ..files import open_regular, regular_file
from ..errors import ProbeError, param, warn


TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "encoder.json", "vocab.bpe", "vocab.txt")


def load_tokenizer(path: str, required: bool = True, purpose: str = "words"):
    """(tokenizer, byte_level) for the checkpoint at ``path``; ``None`` when it has no tokenizer
    files and ``required`` is false. Files that exist but cannot be read are a ProbeError."""
    from .hub import fetch

    try:
        from tokenizers import Tokenizer
        from tokenizers.implementations import BertWordPieceTokenizer, ByteLevelBPETokenizer
    except ImportError:
        raise ProbeError(f"{param(purpose)} needs the 'tokenizers' package: pip install tokenizers") from None
    d, _ = fetch(path)    # the tokenizer files; safetensors weights stay on the hub
    d = d if os.path.isdir(d) else os.path.dirname(os.path.abspath(d))
    has = {n: os.path.join(d, n) for n in TOKENIZER_FILES if os.path.exists(os.path.join(d, n))}
    for f in has.values():     # the tokenizers library opens these itself: any not a regular file is refused first
        regular_file(f, "tokenizer file")
    try:
        if "tokenizer.json" in has:
            tok = Tokenizer.from_file(has["tokenizer.json"])
            tok.no_padding()
            tok.no_truncation()
            return tok, "ByteLevel" in tok.to_str()[:20000]
        for vocab, merges in (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe")):
            if vocab in has and merges in has:
                return ByteLevelBPETokenizer(has[vocab], has[merges]), True
        if "vocab.txt" in has:
            return BertWordPieceTokenizer(has["vocab.txt"], lowercase=True), False
    except Exception as exc:  # the tokenizers library raises plain Exceptions on malformed files
        raise ProbeError(f"{d}: cannot read the tokenizer files ({exc})") from None
    if not required:
        return None
    raise ProbeError(f"{d}: no tokenizer files (tokenizer.json, vocab.json + merges.txt, or vocab.txt) "
                     f"for {param(purpose)}")


def words_to_ids(path: str, words: list[str]) -> np.ndarray:
    """Ids of the single-token words, in order; multi-token words are skipped with a warning."""
    tok, byte_level = load_tokenizer(path)
    ids = []
    for w in (w.strip() for w in words):
        enc = tok.encode((" " + w) if byte_level else w, add_special_tokens=False)
        if len(enc.ids) == 1:
            ids.append(enc.ids[0])
        else:
            warn(f"'{w}' is {len(enc.ids)} tokens ({' '.join(enc.tokens)}); left out")
    if not ids:
        raise ProbeError(f"none of the {param('words')} is a single token of this tokenizer")
    return np.asarray(ids, dtype=np.int64)


def ids_to_text(path: str, ids) -> list[str] | None:
    """Text of each token id from the checkpoint's tokenizer files; ``None`` without them, or
    (with a warning) when they cannot be read: the text only labels rows."""
    try:
        got = load_tokenizer(path, required=False)
    except ProbeError as exc:
        warn(f"{exc}; tokens are labelled by id")
        return None
    return None if got is None else [got[0].decode([int(i)]) for i in ids]


def read_text(path: str, what: str, **kw) -> str:
    """The text of the file ``path``, a ``what`` (a regular file only); a one-line ProbeError when it
    cannot be read."""
    try:
        with open_regular(path, what=what, **kw) as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProbeError(f"{path}: cannot read {what} ({getattr(exc, 'strerror', None) or exc})") from None


def word_list(words=None, words_file: str | None = None) -> list[str]:
    """``words`` (comma-separated text or a list) and the words of ``words_file`` (one per line or
    separated by commas or spaces), in order."""
    out = list(words.split(",") if isinstance(words, str) else (words or []))
    if any(not str(w).strip() for w in out):
        raise ProbeError(f"empty item in {param('words', ','.join(map(str, out)))}: remove the extra comma")
    text = read_text(words_file, "words file") if words_file else ""
    return out + [w for line in text.splitlines() for w in line.replace(",", " ").split()]
