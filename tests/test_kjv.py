"""``--stories kjv``: the King James Version's narrative books read offline through Debian's ``bible``
program, cut into story-sized passages at verse boundaries (issue 38, point 1).

The tests that read the text need ``bible-kjv-text`` and ``bible-kjv`` (``.ci/run`` installs them);
elsewhere they are skipped, saying so, unless ``PROBE_REQUIRE_KJV`` is set (then they fail). The
missing-program and bad-output tests run everywhere: they put a PATH of their own in front.
"""
import json
import os
import re
import shutil
import stat
import subprocess
import sys

import pytest

import probe
from probe.errors import ProbeError
from probe_train import preset
from probe_train.tasks.lm import make_text_task, split_documents
from probe_train.text import load_stories
from probe_train.text.kjv import BOOKS, INSTALL, cut_chapter, kjv_passages

from conftest import run_cli

BIBLE = shutil.which("bible")
needs_bible = pytest.mark.skipif(BIBLE is None and not os.environ.get("PROBE_REQUIRE_KJV"),
                                 reason=f"the King James text is not installed: {INSTALL}")
# Book names as the 'bible' program prints them, for every book that is NOT a story source.
OTHER_BOOKS = ("Job", "Psa", "Prov", "Eccl", "SSol", "Isa", "Jer", "Lam", "Eze", "Dan", "Hos", "Joel",
               "Amos", "Obad", "Jonah", "Mic", "Nahum", "Hab", "Zep", "Hag", "Zec", "Mal", "Rom",
               "1Cor", "2Cor", "Gal", "Eph", "Phi", "Col", "1Th", "2Th", "1Tim", "2Tim", "Titus",
               "Phmn", "Heb", "Jas", "1Pet", "2Pet", "1Jn", "2Jn", "3Jn", "Jude", "Rev")
REF = re.compile(r"([1-3]?[A-Za-z]+)(\d+):(\d+)-(\d+)")


def _bible(*specs: str) -> list[str]:
    out = subprocess.run([BIBLE, "-f", *specs], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL, check=True).stdout
    return out.splitlines()


@needs_bible
def test_passages_are_the_narrative_books_cut_at_verse_boundaries():
    if BIBLE is None:
        pytest.fail(f"PROBE_REQUIRE_KJV is set but the 'bible' program is not installed: {INSTALL}")
    passages = kjv_passages()
    # Deterministic: a second run of the program, in a process of its own, gives the same passages.
    again = subprocess.run(
        [sys.executable, "-c",
         "import json; from probe_train.text.kjv import kjv_passages; print(json.dumps(kjv_passages()))"],
        capture_output=True, text=True, timeout=120, check=True)
    assert [tuple(p) for p in json.loads(again.stdout)] == list(passages)
    assert load_stories("kjv") == [t for _, t in passages]
    assert load_stories("kjv", limit=5) == [t for _, t in passages[:5]]

    refs = [REF.fullmatch(r).groups() for r, _ in passages]
    books = list(dict.fromkeys(b for b, *_ in refs))
    assert books == list(BOOKS)                          # only the chosen books, in canonical order
    assert not set(books) & set(OTHER_BOOKS)
    assert books[0] == "Ge" and books[16] == "Est" and books[17] == "Mat" and books[-1] == "Acts"
    assert passages[0][0].startswith("Ge1:1-") and passages[-1][0].endswith("-31") and refs[-1][:2] == ("Acts", "28")

    # Verse boundaries: every passage is whole consecutive verses of one chapter, the chapters are
    # covered without a gap, and its text is exactly those verses (checked against the program).
    verses = {}
    for line in _bible("Genesis1:1-Esther99:99", "Matthew1:1-Acts99:99"):
        m = re.fullmatch(r"([1-3]?[A-Za-z]+)(\d+):(\d+) (.+)", line.rstrip())  # Mk10:19 ends in a space
        verses[(m[1], int(m[2]), int(m[3]))] = m[4]
    assert len(verses) == 17_656
    covered = []
    for (book, ch, first, last), (_, text) in zip(refs, passages):
        ch, first, last = int(ch), int(first), int(last)
        assert first <= last
        assert text == " ".join(verses[(book, ch, v)] for v in range(first, last + 1))
        covered += [(book, ch, v) for v in range(first, last + 1)]
    assert covered == list(verses)                       # in order, each verse once
    assert verses[("Ge", 1, 1)] == "In the beginning God created the heaven and the earth."

    # Lengths: 175 words a passage, about a TinyStories story (its train split holds ~1.9 GB of text
    # in ~2.1 M stories: ~900 characters, ~175 words each), chosen before any result (issue 38).
    words = [len(t.split()) for _, t in passages]
    assert len(passages) == 2687
    assert 170 <= sum(words) / len(words) <= 180
    assert min(words) >= 80 and max(words) <= 275


def test_a_chapter_is_cut_into_nearly_equal_runs_of_whole_verses():
    verses = [" ".join(["w"] * n) for n in (30, 40, 20, 50, 30, 40, 60, 30, 50)]   # 350 words
    runs = cut_chapter(verses, target=175)
    assert [v for run in runs for v in run] == verses and len(runs) == 2
    assert [sum(len(v.split()) for v in run) for run in runs] == [170, 180]
    assert cut_chapter(verses[:2], target=175) == [verses[:2]]      # short chapter: one passage
    assert len(cut_chapter(["w " * 900], target=175)) == 1           # one long verse is never split


def test_held_out_kjv_passages_are_spread_through_the_text():
    docs = [f"p{i}" for i in range(2687)]
    train, val = split_documents(docs, 0.05, spread=True)
    assert len(val) == round(2687 * 0.05) == 134 and len(train) + len(val) == 2687
    idx = [int(d[1:]) for d in val]
    assert idx[0] == 19 and idx[-1] == 2686 and all(19 <= b - a <= 21 for a, b in zip(idx, idx[1:]))
    assert not set(train) & set(val)
    assert split_documents(docs, 0.05) == (docs[:-134], docs[-134:])  # the other sources: the last ones


@needs_bible
def test_task_holds_out_spread_passages_and_describes_its_text():
    if BIBLE is None:
        pytest.fail(f"PROBE_REQUIRE_KJV is set but the 'bible' program is not installed: {INSTALL}")
    task = make_text_task(preset("lm-tiny", stories="kjv", story_docs=400, logic_docs=40, seq_len=16))
    d = task.describe()
    assert d["stories"] == "kjv" and d["documents"]["story"] == 400
    assert "King James" in d["story_text"] and "first 400 of 2687 (Ge1:1-8 to " in d["story_text"]
    # 20 of the 400 passages held out (every 20th); the text repeats itself (Exodus 25-31 and 35-40),
    # so windows of different passages may hold the same tokens: the split is by passage.
    assert task.indices("story").size > 0 and (~task.is_val).any()


@needs_bible
def test_tiny_training_run_on_kjv_records_its_source(tmp_path):
    if BIBLE is None:
        pytest.fail(f"PROBE_REQUIRE_KJV is set but the 'bible' program is not installed: {INSTALL}")
    out = tmp_path / "kjv.h5"
    res = run_cli("probe-train", "--preset", "lm-tiny", "--stories", "kjv", "--steps", "20", "--threads", "1",
                  "--quiet", "--out", out)
    assert res.returncode == 0, res.stderr
    assert probe.validate(out) == []
    info = probe.info(out)
    assert info["config"]["stories"] == "kjv" and info["task"]["stories"] == "kjv"
    assert info["task"]["story_text"].startswith("King James Version (Debian bible-kjv-text)")
    assert info["task"]["documents"]["story"] == 300                # lm-tiny's story_docs
    res = run_cli("probe", "info", out)
    assert res.returncode == 0 and "\nstories    King James Version" in res.stdout
    res = run_cli("probe", "bias", out, "--step", "latest")
    assert res.returncode == 0 and "loss[story]" in res.stdout


def _path_with(tmp_path, script: str | None):
    """A PATH of the venv's scripts and, if given, a program named ``bible`` running ``script``."""
    d = tmp_path / "bin"
    d.mkdir()
    if script is not None:
        exe = d / "bible"
        exe.write_text("#!/bin/sh\n" + script + "\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    venv_bin = os.path.dirname(shutil.which("probe-train") or "")
    return {**os.environ, "PATH": os.pathsep.join(p for p in (str(d), venv_bin) if p)}


@pytest.mark.parametrize("script,needle", [
    (None, f"need the King James text and its 'bible' program: {INSTALL}"),
    ("echo 'Cannot open data file bible.data' >&2; exit 255", "failed (exit 255: Cannot open data file"),
    ("echo 'Ge1:1 In the beginning God created the heaven'; echo 'and the earth.'",
     "line 2 is not one verse"),
    ("echo 'Ge1:1 In the beginning.'; echo 'Ge1:3 And God said.'", "Ge1:3 does not follow Ge1:1"),
    ("echo 'Job1:1 There was a man.'", "book 'Job' where 'Ge' was due"),
    ("echo 'Ge1:1 In the beginning.'", "1 verses, not the 17656"),
])
def test_missing_or_wrong_bible_program_is_one_error_line(tmp_path, script, needle):
    """Through the installed entry point, with a PATH that lacks the real program (or holds another)."""
    out = tmp_path / "x.h5"
    res = run_cli("probe-train", "--preset", "lm-tiny", "--stories", "kjv", "--quiet", "--out", out,
                  env=_path_with(tmp_path, script))
    assert res.returncode != 0 and "Traceback" not in res.stderr
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("Error: stories 'kjv'") and needle in err[0], res.stderr
    if script is not None:
        assert INSTALL in err[0]
    assert not out.exists()


def test_a_bible_program_that_hangs_is_stopped_with_one_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _path_with(tmp_path, "exec /bin/sleep 30")["PATH"])
    with pytest.raises(ProbeError, match=r"^stories 'kjv': .*bible printed no text within 0.5 s$"):
        kjv_passages(timeout=0.5)
