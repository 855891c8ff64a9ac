"""MkDocs hook: inline code in a table wraps between its words only.

A browser may break a line inside a word of code at a hyphen or a comma (``--`` / ``split``,
``rnn-`` / ``classifier``, ``{count,`` / ``tfidf}``), which CSS alone cannot forbid without
keeping the whole code span on one line. :func:`keep_words_whole` wraps each such word of an
inline ``<code>`` inside a ``<table>`` in ``<span class="keep-word">``, which
``docs/stylesheets/extra.css`` keeps on one line. The words of a ``snake_case`` name are words
too: a ``<wbr>`` after each ``_`` lets a long file, recipe or run name
(``bahdanau_bible_en_es_epyc_bf16_30min_eval_results.json``) wrap there, so that the results
table fits a 1,280 px window. The text (and what a reader copies) is unchanged. The function
is importable without MkDocs (``tests/docs/test_docs_browser.py``).
"""

from __future__ import annotations

import re

TABLE = re.compile(r"<table\b[^>]*>.*?</table>", re.DOTALL)
"""A rendered table (Markdown tables do not nest)."""
PLAIN_CODE = re.compile(r"<code>([^<]*)</code>")
"""Inline code holding text only (highlighted code, with tags inside, is left as it is)."""
WORD = re.compile(r"\S+")
"""A word: a run of characters other than whitespace."""
BREAKABLE = re.compile(r"\W")
"""A character around which a browser may break a line inside a word (``-``, ``,``, ``/``, …)."""
KEEP_WORD = '<span class="keep-word">{}</span>'
"""The markup around a word that must stay on one line."""
SNAKE_JOINT = re.compile(r"(?<=[^\W_])_(?=[^\W_])")
"""An ``_`` between two words (letters or digits) of a ``snake_case`` name, after which the
line may break (``__init__`` has none)."""


def keep_words_whole(html: str) -> str:
    """``html`` with every word of the inline code inside its tables that contains a break
    opportunity (a character other than a letter, digit or ``_``) wrapped in
    :data:`KEEP_WORD`, and a ``<wbr>`` after each :data:`SNAKE_JOINT`; whitespace, the rest of
    the page and code outside tables unchanged."""

    def word(match: re.Match[str]) -> str:
        text = match.group(0)
        joined = SNAKE_JOINT.sub("_<wbr>", text)
        return KEEP_WORD.format(joined) if BREAKABLE.search(text) else joined

    def code(match: re.Match[str]) -> str:
        return f"<code>{WORD.sub(word, match.group(1))}</code>"

    return TABLE.sub(lambda table: PLAIN_CODE.sub(code, table.group(0)), html)


def on_page_content(html, page, config, files):
    """Keep the words of the page's table code whole (see :func:`keep_words_whole`)."""
    return keep_words_whole(html)
