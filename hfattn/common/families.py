"""What hfattn knows about each model family (``model_type``), in one place, without torch.

One :class:`Family` per architecture: the ``transformers`` Auto class that loads it, how
``training.compile`` treats it, how its model card describes its attention and the papers the
card cites. The recipe checks, the training engine's ``compile: auto`` and the model card read
these facts from here.

Only the standard library is imported: the recipe checks and the Hub card read these facts
before torch is imported, and :mod:`hfattn.models` registers each family's Auto class from here.
"""

from collections.abc import Callable
from dataclasses import dataclass


def card_value(value) -> str:
    """A config value as a model card writes it: floats to 4 significant digits, sequences
    comma-separated, anything else as ``str``."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple, set)):
        return ", ".join(str(v) for v in value)
    return str(value)


_RECURRENT_ATTENTION_KEYS = ("score", "distribution", "cell")
"""``config.json`` fields that qualify an RNN encoder-decoder's ``attention`` variant."""


def describe_recurrent_attention(config: dict) -> str | None:
    """An RNN encoder-decoder's attention (``attention`` field): the variant and the fields
    that qualify it, or that there is none; ``None`` for a config without the field."""
    if "attention" not in config:
        return None
    variant = config["attention"]
    details = ", ".join(
        f"{key} `{card_value(config[key])}`"
        for key in _RECURRENT_ATTENTION_KEYS
        if config.get(key) is not None
    )
    if variant is None:
        text = "none (`attention: null`, the encoder's final state only)"
    else:
        text = f"`{card_value(variant)}`"
    return f"{text} ({details})" if details else text


def describe_multi_head_attention(config: dict) -> str | None:
    """A Transformer's attention, e.g. "multi-head `scaled_dot`, 8 heads of dim 64, 6+6 layers
    (encoder+decoder), post-LN": the score (and the distribution when one is set), the heads
    and their size, the layer counts and where the LayerNorms sit (none with T-Fixup);
    ``None`` for a config without ``num_heads``."""
    if config.get("num_heads") is None:
        return None
    score = f"`{config.get('attention_score') or 'scaled_dot'}`"
    if config.get("attention_distribution"):
        score += f" + `{config['attention_distribution']}`"
    heads = f"{config['num_heads']} heads"
    if config.get("head_dim"):
        heads += f" of dim {config['head_dim']}"
    parts = [f"multi-head {score}", heads]
    if config.get("encoder_layers") is not None and config.get("decoder_layers") is not None:
        parts.append(
            f"{config['encoder_layers']}+{config['decoder_layers']} layers (encoder+decoder)"
        )
    if config.get("init_method") == "t-fixup":
        parts.append("no LayerNorm (T-Fixup)")
    elif config.get("norm_position"):
        parts.append(f"{config['norm_position']}-LN")
    return ", ".join(parts)


def describe_pooling_attention(config: dict) -> str | None:
    """A recurrent classifier's pooling: attention pooling with its score (and distribution),
    or none (the final states); ``None`` for a config without ``pooling``."""
    pooling = config.get("pooling")
    if pooling is None:
        return None
    if pooling != "attention":
        return f"none (`pooling: {pooling}`, the final states)"
    text = f"attention pooling, score `{config.get('attention_score') or 'additive'}`"
    if config.get("attention_distribution"):
        text += f", distribution `{config['attention_distribution']}`"
    return text


def describe_continuous_cache(config: dict) -> str | None:
    """A char-RNN's continuous cache (Grave et al. 2017) with its window, flatness and weight,
    or ``None`` when it has none."""
    size = config.get("neural_cache_size")
    if not size:
        return None
    return (
        f"continuous cache over the last {size:,} positions (Grave et al. 2017), "
        f"θ = {config.get('neural_cache_theta')}, λ = {config.get('neural_cache_lambda')}"
    )


@dataclass(frozen=True)
class Family:
    """The facts of one model family."""

    auto_class: str
    """The ``transformers`` Auto model class that loads it (``AutoModelForSeq2SeqLM``, ...)."""
    unrolled_per_length: bool = False
    """Its recurrent layers step position by position under ``torch.compile``
    (:class:`hfattn.models.rnn_layers.RecurrentLayer`), so each padded batch length of its
    length-grouped batches is a graph of its own: ``training.compile: true`` is refused."""
    compiled_by_auto: bool = False
    """``training.compile: auto`` compiles it on CUDA: its training batches have one shape
    (the char-RNN's windows have one length), so the step compiles once or twice in a run.
    Families whose batches change shape from batch to batch (translation, classification,
    length buckets included) are left eager by ``auto``: the Transformer base's compile of one
    graph a bucket took longer than its compiled steps won back in a recipe's run
    (``benchmarks/NOTES.md``); ``training.compile: true``
    compiles them (one graph for all buckets)."""
    describe_attention: Callable[[dict], str | None] | None = None
    """Its model card's "Attention" row from its ``config.json`` (``None``: no row)."""
    papers: tuple[str, ...] = ()
    """The BibTeX keys of the papers its architecture implements, most specific first (the
    entries of :mod:`hfattn.hub.citations`), cited in its model card."""


FAMILIES: dict[str, Family] = {
    "char-rnn": Family(
        auto_class="AutoModelForCausalLM",
        compiled_by_auto=True,
        describe_attention=describe_continuous_cache,
        papers=("karpathy2015unreasonable", "graves2013generating"),
    ),
    "bahdanau": Family(
        auto_class="AutoModelForSeq2SeqLM",
        unrolled_per_length=True,
        describe_attention=describe_recurrent_attention,
        papers=("bahdanau2015neural", "luong2015effective"),
    ),
    "vaswani": Family(
        auto_class="AutoModelForSeq2SeqLM",
        describe_attention=describe_multi_head_attention,
        papers=("vaswani2017attention",),
    ),
    "rnn-classifier": Family(
        auto_class="AutoModelForSequenceClassification",
        unrolled_per_length=True,
        describe_attention=describe_pooling_attention,
    ),
}
"""``model_type`` → its :class:`Family`."""

UNROLLED_PER_LENGTH = tuple(t for t, f in FAMILIES.items() if f.unrolled_per_length)
"""Model types that ``training.compile: true`` refuses (:attr:`Family.unrolled_per_length`)."""
COMPILED_BY_AUTO = tuple(t for t, f in FAMILIES.items() if f.compiled_by_auto)
"""Model types that ``training.compile: auto`` compiles on CUDA
(:attr:`Family.compiled_by_auto`)."""

__all__ = [
    "COMPILED_BY_AUTO",
    "FAMILIES",
    "UNROLLED_PER_LENGTH",
    "Family",
    "card_value",
    "describe_multi_head_attention",
    "describe_pooling_attention",
    "describe_recurrent_attention",
]
