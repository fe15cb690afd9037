"""PATH -> TENSORS for everything that is not our own file's raw layout.

:mod:`.checkpoints` opens a path (Hugging Face folder, safetensors, state dict, nanoGPT,
our snapshots) as a :class:`~.checkpoints.RawSource` of raw tensors; :mod:`.layouts` maps raw
names to canonical ones (``layer3/W_V``), one rule builder per model family; :mod:`.source`
makes any of them a :class:`probe.source.Source`, as a snapshot file's ``Run`` is; :mod:`.tokens`
parses token selections and :mod:`.words` turns words into ids with a checkpoint's tokenizer files.

Nothing is imported here, so ``train`` can use :mod:`.words` without loading the rest.
"""
