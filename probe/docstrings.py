"""The text of the parameters the probes share, written once.

A probe function's numpydoc ``Parameters`` section may hold a line ``{name}`` (alone on its line) for
any parameter below; its declaration (:class:`probe.registry.Probe`) writes the shared entry there, said
about that probe: what ``path`` may be follows what it reads, the default of ``tokens`` is its own, and
``allow_nonfinite`` says what it leaves out. ``help(probe.similarity)``, the API reference and the
numpydoc of another package's probe read the result.
"""
from __future__ import annotations

import re
import textwrap

#: the step grammar every ``step`` option takes (the command line's --step help, and the probes that say
#: more about their own steps)
STEP_GRAMMAR = "latest, all, a step number, A:B (steps in [A, B)) or a comma list of these"

_PATHS = {"weights": "A snapshot file written by ``probe-train``, a checkpoint file or folder, or ``hf:ORG/NAME@REV``.",
          "snapshot": "A snapshot file written by ``probe-train``.",
          "activations": "A snapshot file written by ``probe-train``, or a checkpoint file or folder (with ``text``), "
                         "or ``hf:ORG/NAME@REV``."}

#: name -> (its type line, its description); {...} fields are the probe's (``reads``, ``tokens``, ``nonfinite``)
PARAMETERS = {
    "path": ("str or os.PathLike", "{path}"),
    "tokens": ("str or sequence of int or str, optional",
               "The tokens: group names, ids (``\"3,5,7\"``), a half-open range (``\"11:21\"``) or a list of ids and "
               "group names. ``None`` (and no ``words``): {default}."),
    "words": ("str or list of str, optional",
              "Words instead of ``tokens`` (comma-separated or a list), looked up in a text run's stored vocabulary or "
              "a checkpoint's tokenizer files."),
    "words_file": ("str, optional", "A text file of words, selected after ``words``."),
    "tensor": ("str, default \"token_embedding\"",
               "The tensor whose rows are the token vectors, by canonical name (``token_embedding``) or parameter "
               "name."),
    "step": ("str or int, default \"latest\"",
             "The snapshots: ``\"latest\"``, ``\"all\"``, a step number, a half-open range ``\"A:B\"`` or a comma "
             "list of these (``\"100,500,latest\"``). A checkpoint holds one step."),
    "groups": ("str, optional",
               "A JSON or YAML file of token groups (name -> token ids or words), added to the stored ones."),
    "mapping": ("str, optional",
                "A JSON name-mapping file (canonical -> raw tensor names) for a checkpoint of an unknown layout."),
    "text": ("str, optional",
             "Checkpoints only: a text file to run the model on (with its tokenizer files); a snapshot file stores "
             "what it needs, and ``text`` is ignored there (with a warning)."),
    "window": ("int, default 128", "Checkpoints: tokens per window the text is cut into (at least 2)."),
    "max_tokens": ("int, default 4096", "Checkpoints: tokens of the text used at most (at least 2)."),
    "allow_nonfinite": ("bool, default False",
                        "Compute on the finite part instead of raising on NaN or inf: {nonfinite}. A ``ProbeWarning`` "
                        "says what was left out."),
    "max_memory": ("int or str, optional",
                   "The memory budget of what the probe reads and computes (bytes, or ``\"8GiB\"``, ``\"512MB\"``): a "
                   "tensor that needs more is refused before it is read. ``None``: half of the memory this process "
                   "can have (physical memory, or a lower cgroup or ``ulimit -v`` limit)."),
}
_LINE = re.compile(r"^(?P<indent>[ \t]*)\{(?P<name>\w+)\}[ \t]*$", re.M)
DOC_WIDTH = 116


def entry(name: str, indent: str = "", **fields: str) -> str:
    """Parameter ``name``'s numpydoc entry at ``indent``, its ``{...}`` fields filled from ``fields``."""
    kind, text = PARAMETERS[name]
    body = textwrap.fill(text.format(**fields), DOC_WIDTH, initial_indent=indent + "    ",
                         subsequent_indent=indent + "    ")
    return f"{indent}{name} : {kind}\n{body}"


def fill(doc: str | None, reads: str, default: str, nonfinite: str) -> str | None:
    """``doc`` with every ``{name}`` line of :data:`PARAMETERS` written out for a probe that reads ``reads``,
    selects ``default`` when given no tokens, and goes on past NaN or inf as ``nonfinite`` says."""
    if not doc:
        return doc
    fields = {"path": _PATHS.get(reads, ""), "default": default, "nonfinite": nonfinite}
    return _LINE.sub(lambda m: entry(m["name"], m["indent"], **fields) if m["name"] in PARAMETERS else m[0], doc)
