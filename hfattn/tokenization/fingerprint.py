"""What identifies a tokenizer's encoding: the key under which text encoded with it is kept
(:mod:`hfattn.data.prepared`)."""

from __future__ import annotations

import hashlib
import json


def tokenizer_fingerprint(tokenizer) -> str:
    """16 hex digits of the SHA-256 of everything that decides ``tokenizer``'s ids: the
    ``tokenizer.json`` of a fast tokenizer (vocabulary, merges, normaliser, pre-tokenizer,
    added tokens; not the truncation and padding that calls set) and whether it reads special
    tokens' spellings as text; the vocabulary of a slow one."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        state = json.loads(backend.to_str())
        for setting in ("truncation", "padding"):  # set per call by transformers: not the ids
            state.pop(setting, None)
    else:
        state = sorted(tokenizer.get_vocab().items())
    described = json.dumps(state, ensure_ascii=False, sort_keys=True)
    split = bool(getattr(tokenizer, "split_special_tokens", False))
    return hashlib.sha256(f"{described}\n{split}".encode()).hexdigest()[:16]


__all__ = ["tokenizer_fingerprint"]
