"""MkDocs hook: the results tables of the docs are rendered from ``benchmarks/results/`` at each
build, so a built site never shows a table its files no longer give.

A page of :data:`results_tables.BLOCKS` (``docs/results/index.md``,
``docs/models/bahdanau.md``, ``docs/training.md``, the large corpora of
``docs/tasks/causal-lm.md`` and ``docs/tasks/translation.md``) has its blocks between
``<!-- results:NAME:start -->`` / ``<!-- results:NAME:end -->`` rendered by
``docs/hooks/results_tables.py``, the module ``make results`` runs on the committed files (the
README, which the site does not publish, is rewritten by ``make results`` only).
"""

from __future__ import annotations

import results_tables  # this folder's module: MkDocs loads a hook with its folder on the path


def on_page_markdown(markdown, page, config, files):
    """Render the page's results blocks (:func:`results_tables.render_page`)."""
    return results_tables.render_page(markdown, page.file.abs_src_path)
