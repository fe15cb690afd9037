"""Loss and accuracy of a model on a set of sequences: one function for the trainer and the probes,
so metrics a probe recomputes from stored weights equal the logged ones exactly."""
from __future__ import annotations

import torch
import torch.nn.functional as F


@torch.no_grad()
def evaluate(model, tokens: torch.Tensor, key_pos: torch.Tensor, labels: torch.Tensor, chunk: int = 4096
             ) -> tuple[float, float, torch.Tensor]:
    """(mean cross-entropy, accuracy, logits) over the sequences; NaNs for an empty set."""
    if len(labels) == 0:
        return float("nan"), float("nan"), torch.empty(0, 0)
    was_training = model.training
    model.eval()
    losses, correct, logits_all = [], [], []
    for start in range(0, len(labels), chunk):
        sl = slice(start, start + chunk)
        logits = model(tokens[sl], key_pos[sl])
        y = labels[sl]
        losses.append(F.cross_entropy(logits, y, reduction="sum"))
        correct.append((logits.argmax(-1) == y).sum())
        logits_all.append(logits)
    model.train(was_training)
    n = len(labels)
    return float(torch.stack(losses).sum()) / n, float(torch.stack(correct).sum()) / n, torch.cat(logits_all)


@torch.no_grad()
def evaluate_lm(model, tokens: torch.Tensor, targets: torch.Tensor, chunk: int = 64) -> tuple[float, float]:
    """(mean next-token cross-entropy, next-token accuracy) over every position of the windows."""
    if len(tokens) == 0:
        return float("nan"), float("nan")
    was_training = model.training
    model.eval()
    loss, correct = torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.int64)
    for start in range(0, len(tokens), chunk):
        logits = model.lm_logits(tokens[start:start + chunk]).flatten(0, 1)
        y = targets[start:start + chunk].flatten()
        loss += F.cross_entropy(logits, y, reduction="sum").double().cpu()
        correct += (logits.argmax(-1) == y).sum().cpu()
    model.train(was_training)
    n = targets.numel()
    return float(loss) / n, float(correct) / n
