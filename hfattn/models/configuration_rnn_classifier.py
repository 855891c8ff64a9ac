"""Configuration of the recurrent text classifier (``model_type="rnn-classifier"``)."""

from typing import ClassVar

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

from .config_checks import PositiveInt, PresetsMixin, check_field_rules, choice, positive_int, rate
from .score_names import DISTRIBUTION_NAMES, SCORE_NAMES

CELL_TYPES = ("gru", "lstm")
POOLINGS = ("last", "attention")

_CHOLLET_BILSTM = {
    "vocab_size": 20000,
    "cell": "lstm",
    "hidden_size": 32,
    "num_layers": 1,
    "bidirectional": True,
    "pooling": "last",
    "dropout": 0.5,
}
"""Chollet's (DLwP ch. 11, listings 5.4 and 5.9) IMDb classifier: vocabulary 20000,
``Bidirectional(LSTM(32))`` → ``Dropout(0.5)`` → ``Dense``."""


@strict
class RNNClassifierConfig(PresetsMixin, PreTrainedConfig):
    r"""Configuration for [`RNNForSequenceClassification`]: token embeddings → (bi)GRU/LSTM
    over the real tokens only → pooling → dropout → linear head over ``num_labels`` classes.

    The classes come from the standard ``num_labels`` / ``id2label`` / ``label2id`` and the
    loss from ``problem_type`` (``"single_label_classification"``: cross-entropy,
    ``"multi_label_classification"``: binary cross-entropy with logits, ``"regression"``:
    MSE; inferred from ``num_labels`` and the labels' dtype when ``None``, as in BERT).

    Args:
        vocab_size: number of token ids (special tokens included).
        embedding_dim: size of the token embeddings.
        freeze_embeddings: keep the embedding matrix fixed in training (``requires_grad`` off),
            e.g. for pretrained GloVe / word2vec vectors copied in with
            ``RNNForSequenceClassification.set_embedding_matrix``.
        cell: ``"gru"`` or ``"lstm"``.
        hidden_size: state size of each direction of each layer.
        num_layers: stacked recurrent layers.
        bidirectional: read the text both ways; the features are ``[h→; h←]``.
        pooling: ``"last"`` (the final state of the top layer in each direction: ``h→_T`` after
            the last real token and ``h←_1`` after the first) or ``"attention"`` (a learned
            query ``u`` attends over the top layer's outputs, padding masked).
        attention_score: the pooling's score ``a(u, h_t)``, any name of ``SCORE_NAMES``
            (default ``"additive"``: ``vᵀtanh(W_q u + W_k h_t)``).
        attention_distribution: any name of ``DISTRIBUTIONS`` (default: the score's own).
        attention_score_params: options of the score (e.g. ``{"hidden_size": 64}`` for
            ``"additive"``, ``{"max_length": 600}`` for ``"location"``).
        input_dropout: dropout on the embeddings, the recurrent layer's inputs (Géron's
            ``GRU(128, dropout=0.2)``).
        rnn_dropout: dropout between stacked recurrent layers (``num_layers > 1``).
        dropout: dropout on the pooled features before the head (Chollet's 0.5).
        pad_token_id: id of the padding token (positions are masked by ``attention_mask``;
            the pipeline pads with it).
    """

    model_type = "rnn-classifier"
    attribute_map: ClassVar[dict[str, str]] = {"num_hidden_layers": "num_layers"}

    vocab_size: int = positive_int(20000)
    embedding_dim: int = positive_int(128)
    freeze_embeddings: bool = False
    cell: str = choice("lstm", CELL_TYPES)
    hidden_size: int = positive_int(128)
    num_layers: int = positive_int(1)
    bidirectional: bool = False
    pooling: str = choice("last", POOLINGS)
    attention_score: str = choice("additive", SCORE_NAMES)
    attention_distribution: str | None = choice(None, DISTRIBUTION_NAMES)
    attention_score_params: dict | None = None
    input_dropout: float | int = rate(0.0)
    rnn_dropout: float | int = rate(0.0)
    dropout: float | int = rate(0.0)
    pad_token_id: int | None = 0

    PRESETS: ClassVar[dict[str, dict]] = {
        # Géron, HOML ch. 16: vocabulary 1000, Embedding(128) → GRU(128) → Dense,
        # the IMDb sentiment model that needs masking to learn.
        "geron": {
            "vocab_size": 1000,
            "embedding_dim": 128,
            "cell": "gru",
            "hidden_size": 128,
            "num_layers": 1,
            "bidirectional": False,
            "pooling": "last",
        },
        # Chollet, DLwP ch. 11 (listing 5.4): embeddings of 256 trained from scratch.
        "chollet": {**_CHOLLET_BILSTM, "embedding_dim": 256},
        # The same over frozen GloVe-100 vectors (Chollet's listing 5.9: 2,000,000
        # non-trainable parameters, test accuracy 0.870).
        "chollet-glove": {**_CHOLLET_BILSTM, "embedding_dim": 100, "freeze_embeddings": True},
    }

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)  # type checks of @strict run first
        self.validate_fields()

    def validate_fields(self) -> None:
        """Raise ``ValueError`` naming the field and the allowed values for any bad setting."""
        check_field_rules(self)
        problem = PositiveInt().problem(self.num_labels)  # inherited: no field of this class
        if problem is not None:
            raise ValueError(f"num_labels {problem}")

    @property
    def num_directions(self) -> int:
        """2 for a bidirectional RNN, else 1."""
        return 2 if self.bidirectional else 1

    @property
    def feature_size(self) -> int:
        """Size of the pooled features fed to the head: ``hidden_size × directions``."""
        return self.hidden_size * self.num_directions


__all__ = ["CELL_TYPES", "POOLINGS", "RNNClassifierConfig"]
