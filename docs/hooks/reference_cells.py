"""How the generated reference pages (:mod:`reference_recipes`, :mod:`reference_cli`) write a
value in a Markdown table cell: docstring text on one line with its Markdown escaped, code
spans, and a default as a recipe's YAML writes it.

Importable without MkDocs, as :mod:`reference`.
"""

from __future__ import annotations

import dataclasses
import html
import re

import yaml


def format_value(value: object) -> str:
    """A default as it is written in a recipe's YAML (``null``, ``true``, ``[0.9, 0.999]``)."""
    if dataclasses.is_dataclass(value):
        return ""  # a section: its own fields have the defaults
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10_000)
    return text.strip().removesuffix("...").strip()


CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def text_cell(text: str) -> str:
    """Docstring text for a Markdown table cell: one line; ``<``, ``>``, ``&`` and ``|``
    escaped outside code spans; reST roles (``:class:`X```) reduced to their code span."""
    text = re.sub(r":[a-z]+:`~?\.?([^`]+)`", r"``\1``", " ".join(text.split()))
    out, last = [], 0
    for match in CODE_SPAN.finditer(text):
        out.append(html.escape(text[last : match.start()], quote=False).replace("|", "\\|"))
        out.append(f"`{match[2].strip('`')}`")
        last = match.end()
    out.append(html.escape(text[last:], quote=False).replace("|", "\\|"))
    return "".join(out)


def code_cell(text: str) -> str:
    """``text`` as a code span in a table cell."""
    return f"`{text}`" if text else ""
