"""What the bad-input tests share: the hypothesis budget, the strings they draw, and the one
error line a refused command must print (``tests/recipes/test_bad_input.py``,
``tests/cli/``)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
"""The budget of every property here (the module runs in well under a minute)."""

MIXED_SCRIPTS = "Hello, world! ¿Dónde está? مرحبا بالعالم 你好世界 😀👍🏽 \t\n\x00\u200d\u2028"
"""Latin, Arabic, CJK, emoji (with a skin-tone modifier and a zero-width joiner) and control
characters: the training text of the fixed tokenizers, and the pool of the drawn strings."""

SPECIAL_SPELLINGS = ("<unk>", "<pad>", "a<eos>b", "<bos><bos>")
"""Texts that spell special tokens: ordinary text to every tokenizer (``split_special_tokens``)."""

texts = st.one_of(
    st.text(max_size=40),  # any code point but surrogates
    st.text(alphabet=MIXED_SCRIPTS + "<>[]▁ ", max_size=40),
    st.sampled_from(SPECIAL_SPELLINGS),
)
"""Any Unicode string, biased towards mixed scripts, control characters and special-token
spellings."""


def one_error_line(capsys) -> str:
    """The message of the single ``error: ...`` line a refused command printed on stderr
    (progress bars aside), with no traceback."""
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0].removeprefix("error: ")
