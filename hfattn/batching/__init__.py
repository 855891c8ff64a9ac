"""The training batches: what a split of encoded examples becomes for the training loop.

Every batcher implements :class:`~hfattn.batching.protocol.Batches`, the one contract the
engine (:mod:`hfattn.training.engine`) relies on:

- :mod:`~hfattn.batching.seq2seq`: pairs (translation) and labelled texts (classification),
  length-grouped and padded from lists at each step (``batch_size`` rows or ``max_tokens``);
- :mod:`~hfattn.batching.token_buckets`: either task's examples padded once into a few length
  buckets, batches of a token budget gathered by index (on the device when they fit);
- :mod:`~hfattn.batching.lm`: causal language modelling, windows (stateless), packed blocks
  and contiguous streams (stateful).

The corpora these batches are cut from live in :mod:`hfattn.data`.
"""
