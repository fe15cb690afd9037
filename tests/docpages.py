"""Run the documentation as written: every ``bash`` and ``python`` block of a page, in page order, in a
scratch folder of its own (tests/test_docs.py).

What a page can say, and how this module reads it:

- A fenced ```` ```bash ```` block is run line by line (a line ending in ``\\`` continues) by ``bash``
  with ``set -eo pipefail``, in the page's folder, with the installed ``probe``, ``probe-train`` and
  ``python`` first on the PATH. A ```` ```python ```` block runs in one Python process per page, so a
  page's snippets build on each other as in a notebook.
- A ```` ```text ```` block right after a run block is that block's output: every line must appear,
  in order, in what the block printed on stdout, with each number standing for any number (values
  differ between machines; names, columns and rows may not), a line ``...`` for any lines and ``...``
  inside a line for any text.
- ``<!-- exact -->`` after an output block: its numbers must be printed as shown (a fixed model file's
  numbers are the same on every machine, so the prose may quote them).
- ``<!-- files: A B -->`` after a block: the files the text says it writes; each must exist after it.
- A block whose title (```` ```bash title="..." ````, shown above the block on the site) starts with
  ``Takes`` ('Takes about 3 minutes ...') takes minutes, one starting with ``GPU`` needs CUDA. The suite runs each page up to its first
  such block; the ``slow`` set runs the whole page, GPU blocks where CUDA is present (the test names
  the GPU blocks it left out where it is not).
- A block whose title starts with ``King James`` needs Debian's ``bible-kjv`` program: it runs where that
  is installed (or ``PROBE_REQUIRE_KJV`` is set, as in CI) and the page's test says it left it out elsewhere.
- A block whose title starts with ``Network`` needs the Hugging Face hub: it is shown, not run (the
  tests have no network). ``<!-- not run: REASON -->`` right before a block: shown, not run (a server
  that runs until stopped, a user's own cluster), with the reason said on the page too. The test lists
  every block that is not run, so none is left out silently.
- A command may not change a file an earlier command wrote (examples never overwrite each other's
  outputs) unless it says so with ``--overwrite`` or ``--resume``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SLOW, GPU, NETWORK, KJV = "Takes", "GPU", "Network", "King James"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<info>[^`]*)$")
_TITLE = re.compile(r'title="(?P<title>[^"]*)"')
_FILES = re.compile(r"<!--\s*files:\s*(?P<files>.*?)\s*-->")
_NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<why>.*?)\s*-->")
_EXACT = re.compile(r"<!--\s*exact\s*-->")
_NUMBER = r"[-+−]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?%?"


@dataclass
class Block:
    page: str
    line: int                 # 1-based line of the opening fence
    lang: str
    title: str
    body: str
    output: str | None = None  # the ```text block right after it
    files: list[str] = field(default_factory=list)
    not_run: str | None = None
    exact: bool = False        # <!-- exact --> after its output: numbers as shown, not any number

    @property
    def runs(self) -> bool:
        return self.lang in ("bash", "python") and self.not_run is None and not self.title.startswith(NETWORK)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown page, with its output block, files and not-run mark."""
    lines = path.read_text().splitlines()
    page = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    out: list[Block] = []
    i, pending_not_run, last_end = 0, None, -1
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            text = lines[i]
            nr = _NOT_RUN.search(text)
            if nr:
                pending_not_run = nr.group("why")
            fm = _FILES.search(text)
            if fm and out:
                out[-1].files += fm.group("files").split()
            if _EXACT.search(text) and out:
                out[-1].exact = True
            i += 1
            continue
        indent, fence, info = m.group("indent"), m.group("fence"), m.group("info").strip()
        start = i
        body = []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence) and lines[i].strip().strip("`") == ""):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        i += 1
        lang = info.split()[0] if info else ""
        tm = _TITLE.search(info)
        block = Block(page, start + 1, lang, tm.group("title") if tm else "", "\n".join(body) + "\n",
                      not_run=pending_not_run)
        pending_not_run = None
        between = lines[last_end + 1:start] if out else []
        # a block not run here may show its output too: the test that runs it elsewhere checks it
        if lang == "text" and out and out[-1].lang in ("bash", "python") and out[-1].output is None \
                and not any(s.strip() for s in between):
            out[-1].output = block.body
        else:
            out.append(block)
        last_end = i - 1
    return out


def commands(body: str) -> list[str]:
    """A bash block's commands: one per line, ``\\`` continuing a line, comment-only lines dropped."""
    cmds, cur = [], ""
    for ln in body.splitlines():
        if cur:
            cur += "\n" + ln
        elif ln.strip() and not ln.lstrip().startswith("#"):
            cur = ln
        else:
            continue
        if not cur.rstrip().endswith("\\"):
            cmds.append(cur)
            cur = ""
    if cur:
        cmds.append(cur)
    return cmds


def line_pattern(expected_line: str, exact: bool = False) -> re.Pattern:
    """One expected output line -> a regex for one printed line: each number stands for any number
    (or an undefined value; with ``exact``, for itself), runs of spaces for any spaces, and ``...``
    inside a line for any text (a path that differs between machines)."""
    chunks = []
    for chunk in re.split(r"\.\.\.|…", expected_line.strip()):
        pieces, pos = [], 0
        for m in ([] if exact else re.finditer(_NUMBER, chunk)):
            pieces.append(_loose(chunk[pos:m.start()]))
            pieces.append(r"(?:" + _NUMBER + r"|nan|-|inf|-inf)")
            pos = m.end()
        pieces.append(_loose(chunk[pos:]))
        chunks.append("".join(pieces))
    return re.compile(r"[ \t]*" + ".*?".join(chunks) + r"[ \t]*")


def _loose(text: str) -> str:
    words = [re.escape(w) for w in text.split(" ") if w != ""]
    lead = r"[ \t]*" if text.startswith(" ") else ""
    trail = r"[ \t]*" if text.endswith(" ") else ""
    return lead + r"[ \t]+".join(words) + trail


def check_output(expected: str, actual: str, exact: bool = False) -> bool:
    """Whether ``expected`` appears in ``actual``: its lines follow each other in the printed lines (a
    ``...`` line stands for any lines, none included); lines before its first and after its last may be
    more. Line by line, so a mismatch costs time linear in the output, never a regex blow-up."""
    exp = [ln for ln in expected.rstrip("\n").splitlines()]
    act = [ln.rstrip() for ln in actual.splitlines()]
    pats = [None if ln.strip() in ("...", "…") else line_pattern(ln, exact) for ln in exp]
    from functools import lru_cache

    @lru_cache(maxsize=None)
    def match(e: int, a: int) -> bool:
        if e == len(pats):
            return True
        if pats[e] is None:
            return any(match(e + 1, k) for k in range(a, len(act) + 1))
        return a < len(act) and pats[e].fullmatch(act[a]) is not None and match(e + 1, a + 1)

    return any(match(0, a) for a in range(len(act) + 1))


def environment() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", MPLBACKEND="Agg", PYTHONUNBUFFERED="1",
               COLUMNS="100", HF_HUB_OFFLINE=env.get("HF_HUB_OFFLINE", "1"))
    return env


_DRIVER = r"""
import json, os, sys, traceback
ns = {"__name__": "__main__"}
ctl_in, ctl_out = os.fdopen(int(sys.argv[1]), "r"), os.fdopen(int(sys.argv[2]), "w")
for line in ctl_in:
    req = json.loads(line)
    err = None
    sys.stdout.flush()
    saved = os.dup(1)
    with open(req["stdout"], "wb") as f:
        os.dup2(f.fileno(), 1)
    try:
        exec(compile(req["code"], req["name"], "exec"), ns)
    except SystemExit as e:
        if e.code not in (0, None):
            err = f"SystemExit({e.code!r})"
    except BaseException:
        err = traceback.format_exc()
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
    ctl_out.write(json.dumps({"error": err}) + "\n")
    ctl_out.flush()
"""


class Python:
    """One Python process for a page's python blocks; each block's stdout (its children's too) is caught."""

    def __init__(self, folder: Path, env: dict):
        self.folder = folder
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        self.proc = subprocess.Popen([str(BIN / "python"), "-c", _DRIVER, str(r1), str(w2)], cwd=folder, env=env,
                                     pass_fds=(r1, w2), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL)
        os.close(r1)
        os.close(w2)
        self.to, self.back = os.fdopen(w1, "w"), os.fdopen(r2, "r")

    def run(self, code: str, name: str) -> tuple[str | None, str]:
        out = self.folder / ".docs-block-stdout"
        self.to.write(json.dumps({"code": code, "name": name, "stdout": str(out)}) + "\n")
        self.to.flush()
        answer = self.back.readline()
        text = out.read_text(errors="replace") if out.exists() else ""
        out.unlink(missing_ok=True)
        if not answer:
            return f"the page's Python process ended: {self.proc.wait()} {self.proc.stderr.read()[-3000:]}", text
        return json.loads(answer)["error"], text

    def close(self) -> None:
        self.to.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.back.close()
        self.proc.stderr.close()


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    seen = {}
    for top, _, names in os.walk(folder):  # not into the examples/ link
        for name in names:
            p = Path(top) / name
            if p.is_file() and not p.is_symlink() and not name.startswith((".docs-block", ".")):
                st = p.stat()
                seen[str(p.relative_to(folder))] = (st.st_mtime_ns, st.st_size)
    return seen


def _may_rewrite(cmd: str) -> bool:
    return any(f in cmd for f in ("--overwrite", "--resume", ">>"))


def kjv_here() -> bool:
    """Whether the King James blocks run here: the ``bible`` program is installed, or CI requires it."""
    return shutil.which("bible") is not None or bool(os.environ.get("PROBE_REQUIRE_KJV"))


def kjv_blocks(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.runs and b.title.startswith(KJV)]


def run_page(path: Path, folder: Path, whole: bool = False, gpu: bool = False, timeout: float = 1800,
             printed: dict | None = None) -> list[str]:
    """Run the blocks of ``path`` in ``folder``, in order; returns the failures (empty: the page works as
    written). Without ``whole``, up to the first block that takes minutes or a GPU (the fast set); with
    it, every block, those needing a GPU only when ``gpu`` (the slow set). ``printed``: filled with what
    each block printed, by its first line (:func:`regenerate`)."""
    env = environment()
    # the pages speak from a clone's root: its example scripts are where they say
    if not (folder / "examples").exists():
        (folder / "examples").symlink_to(ROOT / "examples")
    py = None
    try:
        for b in blocks(path):
            if not b.runs:
                continue
            if b.title.startswith((SLOW, GPU)) and not whole:
                break
            if b.title.startswith(GPU) and not gpu:
                continue
            if b.title.startswith(KJV) and not kjv_here():
                continue
            before = _files(folder)
            if b.lang == "bash":
                # one script per block, as typed into one terminal: a variable set on one line is there on
                # the next; the first failing command stops it and is named
                script = ("set -eo pipefail\ntrap 'echo \"docs: failed: $BASH_COMMAND\" >&2' ERR\n"
                          + "\n".join(commands(b.body)) + "\n")
                p = subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True,
                                   timeout=timeout)
                stdout = p.stdout
                if p.returncode != 0:
                    failed = [ln for ln in p.stderr.splitlines() if ln.startswith("docs: failed: ")]
                    what = failed[-1][len("docs: failed: "):] if failed else "the block"
                    return [f"{b.where}: `{what}` exited {p.returncode}\nstdout: {p.stdout[-2000:]}\n"
                            f"stderr: {p.stderr[-3000:]}"]
            else:
                py = py or Python(folder, env)
                err, stdout = py.run(b.body, f"<{b.where}>")
                if err:
                    return [f"{b.where}: the python block failed:\n{err}\nstdout: {stdout[-2000:]}"]
            if not (b.lang == "bash" and any(_may_rewrite(c) for c in commands(b.body))):
                after = _files(folder)
                changed = [f for f, st in before.items() if f in after and after[f] != st]
                if changed:
                    kind = "the block" if b.lang == "bash" else "the python block"
                    return [f"{b.where}: {kind} rewrote {changed}, written by an earlier example"]
            if printed is not None:
                printed[b.line] = stdout
                continue
            if b.output is not None and not check_output(b.output, stdout, b.exact):
                return [f"{b.where}: the output differs from the page's\n--- page:\n{b.output}--- printed:\n{stdout}"]
            missing = [f for f in b.files if not (folder / f).exists()]
            if missing:
                return [f"{b.where}: the page says it writes {missing}; not there"]
        return []
    finally:
        if py is not None:
            py.close()


def is_slow(path: Path) -> bool:
    """Whether a page has blocks past the fast set: one that takes minutes or needs a GPU."""
    return any(b.runs and b.title.startswith((SLOW, GPU)) for b in blocks(path))


def gpu_blocks(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.runs and b.title.startswith(GPU)]


def nav_pages() -> list[Path]:
    """The README, then the site's pages in the order of mkdocs.yml's nav."""
    text = (ROOT / "mkdocs.yml").read_text()
    nav = text[text.index("\nnav:"):]
    pages = re.findall(r"([\w./-]+\.md)\s*$", nav, re.M)
    return [ROOT / "README.md"] + [ROOT / "docs" / p for p in pages]


def regenerate(path: Path, folder: Path) -> list[int]:
    """Rewrite the output block of each ``python`` block of ``path`` with what it prints now (a Python
    output is regenerated, never typed; a ``bash`` block's output is often cut with ``...`` and stays as
    written). Runs the whole page in ``folder``; returns the lines of the blocks rewritten.

    ``python tests/docpages.py docs/tutorials/seed-sweep.md`` (in a scratch folder of its own)."""
    printed: dict[int, str] = {}
    failures = run_page(path, folder, whole=True, printed=printed)
    if failures:
        raise RuntimeError(failures[0])
    lines = path.read_text().split("\n")
    done = []
    for b in reversed(blocks(path)):   # from the end: a rewrite changes the line numbers below it only
        if b.lang != "python" or b.output is None or b.line not in printed:
            continue
        close = next(i for i in range(b.line, len(lines)) if lines[i].strip() == "```")   # the code's fence
        start = next(i for i in range(close + 1, len(lines)) if lines[i].startswith("```text"))
        end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "```")
        lines[start + 1:end] = printed[b.line].rstrip("\n").split("\n")
        done.append(b.line)
    path.write_text("\n".join(lines))
    return sorted(done)


if __name__ == "__main__":
    import tempfile

    for page in sys.argv[1:]:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"{page}: rewrote the outputs of the python blocks at lines {regenerate(Path(page).resolve(), Path(tmp))}")
