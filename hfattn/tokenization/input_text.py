"""What hfattn's commands and its Spaces say about a user's input text, in the same words: a
blank text is refused (:func:`blank_text_error`), and the parts of a text that the tokenizer
maps to its unknown token are named (:func:`unknown_pieces`, :func:`unknown_warning`), for any
vocabulary (character, word, BPE, WordPiece).

A Space runs with only transformers, torch and gradio installed, so this module imports nothing
but the standard library (the tokenizer is passed in): ``hfattn push --space`` and
``hfattn demo`` stage a copy of it next to the Space's ``app.py``
(:data:`hfattn.hub.space.INPUT_TEXT_FILE`), and the Space's ``frame.py`` calls it where the
commands call it through :func:`hfattn.commands.inputs.text_command_inputs` and
:func:`hfattn.tokenization.characters.warn_unknown`.
"""

from __future__ import annotations

from collections.abc import Sequence


def blank_text_error(texts: Sequence[str], item: str, verb: str) -> str | None:
    """The refusal of the first of ``texts`` that holds nothing but whitespace,
    ``"<item> <i> is blank: there is nothing to <verb>"`` (``i`` counted from 0, as the
    commands number their inputs: ``source 1``); ``None`` when every text holds more."""
    blank = next((i for i, text in enumerate(texts) if not text.strip()), None)
    return None if blank is None else f"{item} {blank} is blank: there is nothing to {verb}"


def unknown_pieces(tokenizer, text: str) -> tuple[list[str], bool]:
    """The parts of ``text`` that ``tokenizer`` maps to its unknown token, each once in order of
    appearance (characters for a character vocabulary, words for a word vocabulary, the unseen
    runs inside a word for BPE / WordPiece), and whether *everything* but whitespace became
    unknown. Found from the fast tokenizer's offsets, so it holds for any vocabulary; a slow
    tokenizer, or one without an unknown token (byte-level BPE), gives ``([], False)``."""
    unk = tokenizer.unk_token_id
    if unk is None or not getattr(tokenizer, "is_fast", False) or not text.strip():
        return [], False
    encoded = tokenizer(
        text, add_special_tokens=False, return_offsets_mapping=True, split_special_tokens=True
    )
    pieces, known = {}, False
    for token, (start, end) in zip(encoded["input_ids"], encoded["offset_mapping"], strict=True):
        if token == unk:
            pieces.setdefault(text[start:end], None)
        elif text[start:end].strip():
            known = True
    return list(pieces), bool(pieces) and not known


def unknown_warning(tokenizer, text: str, name: str) -> tuple[list[str], str | None]:
    """The :func:`unknown_pieces` of ``text`` (called ``name`` in the message: ``prompt``,
    ``source 2``) and the one-line warning that names them, a stronger one when the whole text
    became unknown; ``([], None)`` when there is nothing to warn about."""
    pieces, everything = unknown_pieces(tokenizer, text)
    if not pieces:
        return pieces, None
    kind = "characters" if all(len(piece) == 1 for piece in pieces) else "words"
    shown = ", ".join(repr(piece) for piece in pieces)
    unk = tokenizer.unk_token
    if everything:
        return pieces, (
            f"{name} is all {unk}: none of its {kind} is in the model's vocabulary ({shown}); "
            "the model sees nothing of it"
        )
    return pieces, f"{name} {kind} not in the vocabulary, mapped to {unk}: {shown}"


__all__ = ["blank_text_error", "unknown_pieces", "unknown_warning"]
