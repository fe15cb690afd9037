"""Real narrative text offline: the King James Version's narrative books, cut into story-sized passages.

``--stories kjv`` reads Debian's ``bible-kjv-text`` (the King James Version, public domain) through
the ``bible`` program of package ``bible-kjv`` (the data file is in the program's own compressed
format). Fixed before any result on it was seen (issue 38), and never tuned to one:

- **Books**: the narrative books, Genesis through Esther (17 books) and the four Gospels with Acts
  (5 books): 17,656 verses, about 470,000 words, in canonical order.
- **Passages**: each chapter is cut, at verse boundaries, into ``max(1, round(words / 175))``
  passages of nearly equal word count (a cut goes after the verse whose running word count is
  nearest to each multiple of ``words / k``); a passage never crosses a chapter, so never a book.
  175 words is about the length of a TinyStories story (its train split holds roughly 1.9 GB of
  text in 2.1 M stories: about 900 characters, 175 words, each). The verses of a passage are joined
  by single spaces, without their references. This gives 2,687 passages of 93 to 262 words
  (mean 174.5).
- **Held-out part**: :func:`probe_train.tasks.lm.split_documents` holds out, of the passages a run
  uses, ``max(1, round(n * val_fraction))`` spread evenly through them (every 20th at the default
  ``val_fraction`` 0.05) rather than the last ones as for the other sources: the last passages would
  be the end of Acts alone, one book's names and events, where every 20th passage samples every
  book like the held-out stories of the other sources.

The program runs once per process (cached), without a shell, under a time limit; every line it
prints is checked (reference format, books in order, chapters and verses numbered from 1 without a
gap, the total verse count), so a damaged data file or another program named ``bible`` gives a clear
error, not wrong text.
"""
from __future__ import annotations

import functools
import itertools
import os
import re
import shutil
import subprocess

from probe.errors import ProbeError

INSTALL = "apt-get install bible-kjv-text bible-kjv"
TARGET_WORDS = 175
# Ranges the program clamps to each last book's last verse (its documented "Rev99:99" rule).
_SPANS = ("Genesis1:1-Esther99:99", "Matthew1:1-Acts99:99")
# The references' book names as the program prints them, in canonical order.
BOOKS = ("Ge", "Exo", "Lev", "Num", "Deu", "Josh", "Jdgs", "Ruth", "1Sm", "2Sm", "1Ki", "2Ki", "1Chr",
         "2Chr", "Ezra", "Neh", "Est", "Mat", "Mark", "Luke", "John", "Acts")
_VERSES = 17_656
_LINE = re.compile(r"([1-3]?[A-Za-z]+)(\d+):(\d+) (\S.*)")
_TIMEOUT_S = 60.0


def installed() -> bool:
    """Whether the King James text can be read here: the ``bible`` program is on the PATH."""
    return shutil.which("bible") is not None


def _run_bible(timeout: float) -> tuple[str, str]:
    """(the program's path, what it printed) for the narrative books, one verse a line."""
    exe = shutil.which("bible")
    if exe is None:
        raise ProbeError(f"stories 'kjv' need the King James text and its 'bible' program: {INSTALL}")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # -f alone never wraps; no width from the terminal
    try:
        res = subprocess.run([exe, "-f", *_SPANS], stdin=subprocess.DEVNULL, capture_output=True,
                             timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise ProbeError(f"stories 'kjv': {exe} printed no text within {timeout:g} s") from None
    except OSError as e:
        raise ProbeError(f"stories 'kjv': cannot run {exe}: {e.strerror or e}") from None
    if res.returncode != 0:
        said = (res.stderr or res.stdout).decode("utf-8", "replace").strip().splitlines()
        why = said[0][:200] if said else "no message"
        raise ProbeError(f"stories 'kjv': {exe} failed (exit {res.returncode}: {why}); reinstall: {INSTALL}")
    try:
        return exe, res.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise ProbeError(f"stories 'kjv': {exe} printed text that is not UTF-8; reinstall: {INSTALL}") from None


def _chapters(text: str, exe: str) -> list[tuple[str, list[str]]]:
    """(reference of the chapter's first verse, its verses) per chapter, checking every line."""

    def bad(why: str) -> ProbeError:
        return ProbeError(f"stories 'kjv': unexpected output of {exe} ({why}); reinstall: {INSTALL}")

    chapters: list[tuple[str, list[str]]] = []
    book, chapter, verse = -1, 0, 0
    lines = text.splitlines()
    for lineno, line in enumerate(lines, 1):
        m = _LINE.fullmatch(line.rstrip())
        if m is None:
            raise bad(f"line {lineno} is not one verse: {line[:60]!r}")
        name, c, v = m[1], int(m[2]), int(m[3])
        if book < 0 or name != BOOKS[book]:
            if book + 1 >= len(BOOKS) or name != BOOKS[book + 1]:
                raise bad(f"line {lineno}: book {name!r} where {BOOKS[min(book + 1, len(BOOKS) - 1)]!r} was due")
            book, chapter, verse = book + 1, 0, 0
        if (c, v) == (chapter + 1, 1):
            chapter, verse = c, 1
            chapters.append((f"{name}{c}:1", []))
        elif (c, v) == (chapter, verse + 1):
            verse = v
        else:
            raise bad(f"line {lineno}: {name}{c}:{v} does not follow {name}{chapter}:{verse}")
        chapters[-1][1].append(m[4])
    if len(lines) != _VERSES or book != len(BOOKS) - 1:
        raise bad(f"{len(lines)} verses, not the {_VERSES} of Genesis-Esther and Matthew-Acts")
    return chapters


def cut_chapter(verses: list[str], target: int = TARGET_WORDS) -> list[list[str]]:
    """The chapter's verses in ``max(1, round(words / target))`` runs of nearly equal word count."""
    counts = [len(v.split()) for v in verses]
    total = sum(counts)
    k = max(1, round(total / target))
    running = list(itertools.accumulate(counts))
    cuts: list[int] = []
    for j in range(1, k):
        at = min(range(len(running)), key=lambda i: (abs(running[i] - j * total / k), i))
        if (not cuts or at > cuts[-1]) and at < len(running) - 1:
            cuts.append(at)
    bounds = [0] + [i + 1 for i in cuts] + [len(verses)]
    return [verses[a:b] for a, b in zip(bounds, bounds[1:])]


@functools.lru_cache(maxsize=1)
def kjv_passages(timeout: float = _TIMEOUT_S) -> tuple[tuple[str, str], ...]:
    """The narrative books' passages in canonical order: ``(reference, text)``, e.g. ``("Ge1:1-13", ...)``.

    Deterministic: the same 2,687 passages on every machine with the package (see the module's
    docstring for the books and the cutting rule).

    Raises
    ------
    ProbeError
        ``bible`` missing (names the install command), failing, too slow, or printing anything but
        the expected verses.
    """
    exe, text = _run_bible(timeout)
    out = []
    for ref, verses in _chapters(text, exe):
        book_chapter = ref.split(":")[0]
        first = 1
        for run in cut_chapter(verses):
            out.append((f"{book_chapter}:{first}-{first + len(run) - 1}", " ".join(run)))
            first += len(run)
    return tuple(out)


def kjv_text_note(n: int) -> str:
    """What ``n`` kjv passages are, for the run file: source, books, cutting and the span used."""
    passages = kjv_passages()
    n = max(1, min(n, len(passages)))
    return (f"King James Version (Debian bible-kjv-text): Genesis-Esther and Matthew-Acts in passages of "
            f"about {TARGET_WORDS} words cut at verse boundaries within chapters, in canonical order; the "
            f"first {n} of {len(passages)} ({passages[0][0]} to {passages[n - 1][0]}); held out: passages "
            f"spread evenly through them")
