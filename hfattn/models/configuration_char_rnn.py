"""Configuration of the character-level recurrent language model (``model_type="char-rnn"``)."""

from typing import ClassVar

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

from .config_checks import (
    PresetsMixin,
    check_field_rules,
    choice,
    non_negative_int,
    positive_int,
    positive_number,
    rate,
)

CELL_TYPES = ("gru", "lstm", "rnn")


@strict
class CharRNNConfig(PresetsMixin, PreTrainedConfig):
    r"""Configuration for [`CharRNNForCausalLM`].

    The model is ``Embedding(vocab_size, embedding_dim) → num_layers × cell(hidden_size) →
    Linear(hidden_size, vocab_size)``, Géron's (HOML ch. 16) and Karpathy's char-rnn.

    Args:
        vocab_size: number of characters in the vocabulary (special tokens included).
        embedding_dim: size of the character embeddings.
        hidden_size: size of the recurrent state of every layer.
        num_layers: number of stacked recurrent layers.
        cell: ``"gru"``, ``"lstm"`` or ``"rnn"`` (Elman, tanh).
        dropout: dropout on the embeddings, between recurrent layers and before the head.
        tie_word_embeddings: share the input embedding matrix with the output layer; when
            ``hidden_size != embedding_dim`` a bias-free projection ``hidden → embedding`` is
            inserted before the tied output layer.
        neural_cache_size: how many earlier positions the continuous cache of Grave et al.
            (2017) keeps (:mod:`~.neural_cache`): outside training, each position attends over
            the hidden states of that many earlier ones and the characters that followed them
            get ``neural_cache_lambda`` of the probability. 0 (default): no cache.
        neural_cache_theta: the flatness ``θ`` of the cache's attention ``softmax(θ h_tᵀ h_j)``.
        neural_cache_lambda: the weight ``λ`` of the cache in
            ``p = (1 − λ) p_model + λ p_cache``.
        initializer_range: standard deviation of the normal init of embeddings and linears.
        use_cache: return the recurrent state as ``cache`` (O(1) per new character
            in ``generate``).
    """

    model_type = "char-rnn"
    attribute_map: ClassVar[dict[str, str]] = {"num_hidden_layers": "num_layers"}

    vocab_size: int = positive_int(68)
    embedding_dim: int = positive_int(64)
    hidden_size: int = positive_int(256)
    num_layers: int = positive_int(1)
    cell: str = choice("gru", CELL_TYPES)
    dropout: float | int = rate(0.0)
    tie_word_embeddings: bool = False
    neural_cache_size: int = non_negative_int(0)
    neural_cache_theta: float | int = positive_number(0.1)
    neural_cache_lambda: float | int = rate(0.1)
    initializer_range: float | int = 0.02
    use_cache: bool = True
    pad_token_id: int | None = 0
    unk_token_id: int | None = 1
    bos_token_id: int | None = 2
    eos_token_id: int | None = 3

    PRESETS: ClassVar[dict[str, dict]] = {
        # Géron, HOML ch. 16: Embedding(16) → GRU(128) → Dense(vocab)
        "geron": {"embedding_dim": 16, "hidden_size": 128, "num_layers": 1, "cell": "gru"},
        # Karpathy's char-rnn default: 2-layer LSTM with 128 units
        "karpathy": {"embedding_dim": 128, "hidden_size": 128, "num_layers": 2, "cell": "lstm"},
    }

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)  # type checks of @strict run first
        check_field_rules(self)  # the rules declared on the fields


__all__ = ["CELL_TYPES", "CharRNNConfig"]
