"""Tokenizers built with the ``tokenizers`` library, saved as ``transformers`` fast tokenizers:
the character tokenizer (:mod:`.characters`) and the translation tokenizers, word, character,
BPE and unigram, joint or per language (:mod:`.translation`)."""
