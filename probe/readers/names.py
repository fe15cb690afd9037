"""What a checkpoint's name says: the training step in it (``checkpoint-500``, ``step1000``,
``hf:ORG/NAME@step1000``), the files that make a folder a model folder, and the checkpoints whose names
state a step in a folder of them (one run's steps)."""
from __future__ import annotations

import os
import re

from ..errors import ProbeError

FOLDER_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
_STEP_PATTERNS = (r"(?:^|[_.-])step[_-]?(\d+)$", r"(?:^|[_.-])step[_-]?(\d+)[_.-]", r"checkpoint[_-](\d+)$",
                  r"(?:^|[_.-])iter[_-]?(\d+)$", r"(?:^|[_.-])epoch[_-]?(\d+)$", r"^model[_-](\d+)$",
                  r"^ckpt[_-](\d+)$")


def step_from_name(path: str) -> int | None:
    """The training step a checkpoint's file or folder name states (step1000, model_20.pt,
    checkpoint-500, iter_300, epoch-3, hf:ORG/NAME@step1000); None for anything else (phi-2,
    llama-7b, ckpt.pt)."""
    if path.startswith("hf:"):         # a hub revision: hf:ORG/NAME@step1000
        path = path.partition("@")[2]
        if not path:
            return None
    stem = os.path.basename(os.path.normpath(path))
    if stem in FOLDER_FILES or re.fullmatch(r"(model|pytorch_model)-\d+-of-\d+\.(safetensors|bin)", stem):
        stem = os.path.basename(os.path.dirname(os.path.abspath(path)))   # checkpoint-500/model.safetensors
    stem = re.sub(r"\.(safetensors|pt|pth|bin|h5|hdf5|ckpt)$", "", stem)
    for pat in _STEP_PATTERNS:
        m = re.search(pat, stem, flags=re.IGNORECASE)
        if m:
            return int(m.group(1))
    return None


NUMBERED = (".safetensors", ".pt", ".pth", ".bin")   # weight files a folder of checkpoints holds


def model_folder(path: str) -> bool:
    """Whether ``path`` is one model's folder (``config.json`` with its weights): one checkpoint."""
    return os.path.isdir(path) and any(os.path.exists(os.path.join(path, f)) for f in FOLDER_FILES)


def numbered_checkpoints(folder: str) -> list[tuple[int, str]]:
    """The checkpoints of one training in ``folder``, (step, path) by step (:func:`series`'s first part)."""
    return series(folder)[0]


def series(folder: str) -> tuple[list[tuple[int, str]], list[tuple[int, str, str]]]:
    """The checkpoints of one training in ``folder``, (step, path) by step: model folders whose names
    state a step (a Trainer's ``checkpoint-500/``) and weight files (``ckpt_1000.pt``,
    ``step-500.safetensors``, ``model_00200.safetensors``); none for a model folder, which is one
    checkpoint, or a file. Other entries are left alone (``config.json``, the tokenizer's files, a
    ``final.pt``). Nothing is opened here: a checkpoint is read when its step is.

    Second, what is left out though its name states a step, (step, name, why) by step, for the callers to
    say: a folder that is empty, one without a weights file, and one without the ``config.json`` the
    other checkpoint folders have (its head count unknown, it would not read as the same model).

    Raises
    ------
    ProbeError
        Two checkpoints state the same step.
    """
    if not os.path.isdir(folder) or model_folder(folder):
        return [], []
    found: dict[int, str] = {}
    out: list[tuple[int, str, str]] = []
    for name in sorted(os.listdir(folder)):
        full = os.path.join(folder, name)
        step = step_from_name(full)
        if os.path.isdir(full) and not model_folder(full):
            if step is not None:   # a checkpoint-N/ the training began or emptied: said, not skipped unseen
                out.append((step, name, "an empty folder" if not os.listdir(full) else
                            f"no weights file ({', '.join(FOLDER_FILES[:-1])} or {FOLDER_FILES[-1]})"))
            continue
        if step is None or not (os.path.isdir(full) or name.endswith(NUMBERED)):
            continue
        if step in found:
            raise ProbeError(f"{folder}: two checkpoints state step {step} ({os.path.basename(found[step])} and "
                             f"{name}); keep one of them there")
        found[step] = full
    # model folders without config.json beside ones with it: their head count unknown, they would not read as
    # the others' model (a folder where none has one is one model without a config, read as that)
    configured = {s for s, p in found.items() if os.path.isdir(p) and os.path.exists(os.path.join(p, "config.json"))}
    for s, p in list(found.items()):
        if configured and os.path.isdir(p) and s not in configured:
            out.append((s, os.path.basename(p), "no config.json beside its weights, as the other checkpoints have "
                                                "(save_pretrained writes one): copy the config.json of the model it "
                                                "holds there to read its step"))
            del found[s]
    return sorted(found.items()), sorted(out)
