"""What a checkpoint's name says: the training step in it (``checkpoint-500``, ``step1000``,
``hf:ORG/NAME@step1000``), and the files that make a folder a model folder."""
from __future__ import annotations

import os
import re

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
