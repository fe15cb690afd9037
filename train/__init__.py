"""Trainer for the papers' tasks and models; writes snapshot files (see ``schemas/``)."""
from .config import PRESETS, RunConfig, preset

__all__ = ["PRESETS", "RunConfig", "preset", "Trainer", "train", "gamma_init_", "GammaInitTable"]


def __getattr__(name):  # torch is imported only when training is asked for
    if name in ("Trainer", "TrainResult"):
        from . import trainer

        return getattr(trainer, name)
    if name in ("gamma_init_", "GammaInitTable"):
        from . import gamma

        return getattr(gamma, name)
    if name == "train":
        from .trainer import Trainer

        def train(cfg, out, **kw):
            """Train ``cfg`` and write ``out``; returns a :class:`~probe_train.trainer.TrainResult`."""
            return Trainer(cfg, out, **kw).run()

        return train
    raise AttributeError(name)
