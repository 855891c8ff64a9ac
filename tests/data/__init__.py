"""``hfattn.data`` and ``hfattn.tokenization``: corpora, generators, batches, tokenizers."""
