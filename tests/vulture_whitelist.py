"""What vulture (tests/test_dead_code.py) cannot see used: public API that only users call, names that
Python, Click, dataclasses or importlib reach by protocol. Each line says why."""
# ruff: noqa
from probe import api, registry
from probe.analyses.base import Result, Results
from probe.analyses.dynamics import DynamicsResult
from probe.analyses.spectrum import LayerSpectrum
from probe.cli import Commands
from probe_train.config import RunConfig

Result.to_frame, Results.to_frame             # the notebook API (docs, examples/tutorial.ipynb)
Result._repr_html_, Results._repr_html_       # IPython calls it: a notebook shows a result as a table
api.token_text, api.token_vectors             # public API: a probe in another package starts from token_vectors
Commands.get_command                          # Click calls it (its lazy-group protocol)
DynamicsResult.steps_logged, DynamicsResult.spike_steps   # result fields: to_dict() / JSON output
LayerSpectrum.num_evals                       # a result field: the spectrum table and its JSON
RunConfig.gamma_embed, RunConfig.gamma_attn, RunConfig.gamma_qk, RunConfig.gamma_vo, RunConfig.gamma_mlp, RunConfig.gamma_head   # config fields, read by name
_.__dir__                                     # PEP 562 module __dir__ (probe, probe.api, probe.report)
_.__signature__                               # read by Typer: probe-train's generated options (train/cli.py)
_.format_options                              # Click calls it: probe-train --help's headings (train/cli.py)
_.make_anchor_task, _.make_composite_task, _.make_text_task   # found by name (train/tasks/__init__.py)
_.run_finished                                # used by tests and the figures (train/runs.py)
from probe import callbacks
callbacks.TransformersCallback, callbacks.LightningCallback   # public API: users hand them to their Trainer
_.on_train_begin, _.on_step_begin, _.on_step_end, _.on_log, _.on_train_end   # transformers.Trainer calls them
_.on_train_start, _.on_train_batch_start, _.on_train_batch_end, _.on_fit_end, _.on_exception          # Lightning's Trainer calls them
from probe.recorder import Recorder
Recorder.bytes_per_snapshot                   # public API: what a snapshot costs (docs/how-to/record-your-loop.md)
