"""Text that came from outside (file names, names stored in files) made printable everywhere.

A file name that is not valid UTF-8 reaches Python as a ``str`` holding surrogate escapes
(PEP 383: the byte 0xff becomes U+DCFF). Such a string cannot be encoded to UTF-8, so printing it
under a strict locale, putting it in JSON, drawing it with matplotlib or writing it into a page
fails. Everywhere the toolkit shows text, each such byte is written as ``\\xNN`` (``run-\\xff.h5``,
as Python spells ``b'run-\\xff.h5'``); other lone surrogates (from a ``\\udXXX`` escape in a JSON
header) as ``\\uXXXX``. The result is valid Unicode: strict JSON, UTF-8 files and any terminal take
it. A name that really holds a backslash followed by ``xNN`` reads the same: the escaping is for
people, not a way back to the bytes.

Three doors, one spelling: :func:`shown` for text built on purpose (JSON values, plot titles, the
report page), and the ``probe.shown`` codec error handler (:data:`ERRORS`), which ``run_cli`` puts
on stdout and stderr so that every ``print`` of a path — tables, CSV, error and warning lines —
writes the same ``\\xNN`` instead of failing (characters the locale's encoding lacks, e.g. ``é``
under an ASCII locale, become ``\\xe9`` / ``\\u0394`` as Python's ``backslashreplace`` writes them).

The third, :func:`terminal`, is for text bound for a terminal: a terminal obeys control
characters rather than showing them, so a tensor name holding ``ESC ] 0 ; ... BEL`` would retitle the
window, ``ESC [ 2 J`` clear it, a carriage return or a bidi override hide or reorder what was written
before it. JSON (``json.dumps`` escapes controls itself) and CSV keep the exact text.
"""
from __future__ import annotations

import codecs
import re

ERRORS = "probe.shown"

_SURROGATE = re.compile("[\ud800-\udfff]")
# characters XML 1.0 forbids (C0 controls but tab, newline, carriage return): an SVG holding one is
# not an image at all, and in HTML they are parse errors; and those that change what a reader sees
# without being seen (DEL and C1 controls, bidi embeddings, overrides, isolates and marks: a run's
# label that reads backwards)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                      "\ud800-\udfff\ufffe\uffff]")


def _escape(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:          # an undecodable byte, as os.fsdecode left it
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(text: str) -> str:
    """``text`` with its surrogate escapes spelled ``\\xNN`` (``\\uXXXX`` for other lone surrogates)."""
    return _SURROGATE.sub(lambda m: _escape(m.group()), text) if _SURROGATE.search(text) else text


def markup_text(text: str) -> str:
    """:func:`shown`, and the control characters XML forbids or that reorder text unseen spelled
    ``\\xNN`` / ``\\uXXXX`` too: text that can go into an HTML page or an SVG image (still to be escaped
    for its context there)."""
    return _CONTROL.sub(lambda m: _escape(m.group()), text) if _CONTROL.search(text) else text


def terminal(text: str) -> str:
    """``text`` as a terminal may show it: every character that ``repr()`` would escape (not
    ``str.isprintable()``: C0 and C1 controls, DEL, bidi embeddings, overrides, isolates and marks,
    zero-width and other format characters, line and paragraph separators, surrogates) spelled
    ``\\xNN`` / ``\\uXXXX``; quotes and backslashes as they are. The one door for file text (and the
    lines that quote it: tables, warnings, ``Error:`` lines, progress) on its way to a terminal."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _handler(exc: UnicodeError):
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return "".join(_escape(ch) for ch in exc.object[exc.start:exc.end]), exc.end


codecs.register_error(ERRORS, _handler)
