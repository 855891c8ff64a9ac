"""Configuration of the RNN encoder-decoder with attention (``model_type="bahdanau"``)."""

from typing import ClassVar

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

from .config_checks import PresetsMixin, check_field_rules, choice, positive_int, rate
from .score_names import DISTRIBUTION_NAMES, SCORE_NAMES
from .scores import SCORES

CELL_TYPES = ("gru", "lstm")
BRIDGES = ("concat", "projection", "zeros")
ATTENTIONS = (None, "bahdanau", "luong")
DEFAULT_SCORES = {"bahdanau": "additive", "luong": "general"}


_GERON_ENCODER_DECODER = {
    "embedding_dim": 128,
    "cell": "lstm",
    "encoder_hidden_size": 256,
    "bidirectional": True,
    "decoder_hidden_size": 512,
    "bridge": "concat",
}
"""Géron's (HOML ch. 16) encoder-decoder sizes, shared by his three presets."""


@strict
class BahdanauConfig(PresetsMixin, PreTrainedConfig):
    r"""Configuration for [`BahdanauForConditionalGeneration`]: an embedding, a (bi)GRU/LSTM
    encoder, a bridge to the decoder's initial state, and a GRU/LSTM decoder with Bahdanau
    (additive, query ``s_{t-1}``), Luong (query ``h_t``, attentional state
    ``h̃_t = tanh(W_c [c_t; h_t])``) or no attention (Sutskever / Cho).

    Args:
        vocab_size: one id space shared by source and target (the tokenizer encodes both).
        embedding_dim: size of the token embeddings.
        share_encoder_decoder_embeddings: one embedding matrix for source and target.
        tie_word_embeddings: the decoder embedding is the output matrix; a bias-free
            projection to ``embedding_dim`` is inserted when the readout size differs.
        cell: ``"gru"`` or ``"lstm"`` (encoder and decoder).
        encoder_hidden_size: state size of each encoder direction.
        encoder_layers: stacked encoder layers.
        bidirectional: bidirectional encoder; the annotations are ``[h→_j; h←_j]``.
        decoder_hidden_size: decoder state size (default ``encoder_hidden_size × directions``).
        decoder_layers: stacked decoder layers.
        bridge: decoder initial state from the encoder's final states: ``"concat"`` (per
            layer ``[h→_T; h←_1]``, Géron's BiLSTM(256) → LSTM(512); needs
            ``decoder_hidden_size == encoder_hidden_size × directions`` and as many layers),
            ``"projection"`` (``s_0 = tanh(W [h→_T; h←_1])`` of the top layer, and the same for
            the LSTM cell) or ``"zeros"``.
        attention: ``None``, ``"bahdanau"`` or ``"luong"``.
        score: any name of ``SCORE_NAMES`` (default ``"additive"`` for bahdanau, ``"general"`` for
            luong).
        score_kwargs: options of the score (e.g. ``{"num_layers": 3}`` for ``"deep"``).
        distribution: any name of ``DISTRIBUTIONS`` (default: the score's own).
        attention_size: hidden size of the additive / deep score (default
            ``decoder_hidden_size``); ignored by the other scores.
        input_feeding: Luong's input feeding, ``h̃_{t-1}`` concatenated to the next input.
        residual_connections: each stacked layer above the first adds its input to its
            output, ``x_l = RNN_l(x_{l-1}) + x_{l-1}`` (Wu et al. 2016, GNMT, section 3.1), in
            the encoder and the decoder: without them the signal of a deep stack fades layer
            by layer at initialisation and a 4-layer Luong model stays at the unigram loss.
        dropout: dropout on embeddings, between stacked layers and on the readout.
        label_smoothing: ``ε_ls`` of the training loss (Szegedy et al. 2016; 0.1 in Vaswani
            et al. 2017): the target distribution is ``(1 - ε)·onehot(y) + ε/V``.
        max_source_positions: longest source (also the ``location`` score's ``max_length``).
        initializer_range: kept for transformers compatibility; the weights are initialised as
            ``BahdanauPreTrainedModel._init_weights`` describes (Glorot linears, N(0, 1)
            embeddings).
        use_cache: return the decoder state as ``cache`` in ``generate``.
    """

    model_type = "bahdanau"
    attribute_map: ClassVar[dict[str, str]] = {
        "num_hidden_layers": "decoder_layers",
        "hidden_size": "decoder_hidden_size",
    }

    vocab_size: int = positive_int(1000)
    embedding_dim: int = positive_int(128)
    share_encoder_decoder_embeddings: bool = True
    tie_word_embeddings: bool = False
    cell: str = choice("lstm", CELL_TYPES)
    encoder_hidden_size: int = positive_int(256)
    encoder_layers: int = positive_int(1)
    bidirectional: bool = True
    decoder_hidden_size: int | None = positive_int(None)
    decoder_layers: int = positive_int(1)
    bridge: str = choice("concat", BRIDGES)
    attention: str | None = choice("bahdanau", ATTENTIONS)
    score: str | None = choice(None, SCORE_NAMES)
    score_kwargs: dict | None = None
    distribution: str | None = choice(None, DISTRIBUTION_NAMES)
    attention_size: int | None = positive_int(None)
    input_feeding: bool = False
    residual_connections: bool = False
    dropout: float | int = rate(0.0)
    label_smoothing: float | int = rate(0.0)
    max_source_positions: int = positive_int(512)
    initializer_range: float | int = 0.02
    use_cache: bool = True
    pad_token_id: int | None = 0
    unk_token_id: int | None = 1
    bos_token_id: int | None = 2
    eos_token_id: int | None = 3
    decoder_start_token_id: int | None = 2

    PRESETS: ClassVar[dict[str, dict]] = {
        # Géron, HOML ch. 16: Embedding(128) → BiLSTM(256) whose concatenated final (h, c)
        # start an LSTM(512) decoder; here with Bahdanau (additive) attention.
        "geron": {**_GERON_ENCODER_DECODER, "attention": "bahdanau", "score": "additive"},
        # The same encoder-decoder without attention (Sutskever et al. / Géron's first model).
        "geron-no-attention": {**_GERON_ENCODER_DECODER, "attention": None},
        # Géron's code uses Keras' Attention layer: Luong dot-product on the decoder outputs.
        "geron-luong": {**_GERON_ENCODER_DECODER, "attention": "luong", "score": "dot"},
        # Bahdanau et al. (2015) RNNsearch: BiGRU(1000) encoder, GRU(1000) decoder,
        # s_0 = tanh(W h_1), additive attention (620-dim embeddings).
        "bahdanau": {
            "embedding_dim": 620,
            "cell": "gru",
            "encoder_hidden_size": 1000,
            "bidirectional": True,
            "decoder_hidden_size": 1000,
            "bridge": "projection",
            "attention": "bahdanau",
            "score": "additive",
            "attention_size": 1000,
        },
        # Luong et al. (2015): 4-layer unidirectional LSTM(1000), general score, input feeding.
        "luong-general": {
            "embedding_dim": 1000,
            "cell": "lstm",
            "encoder_hidden_size": 1000,
            "encoder_layers": 4,
            "bidirectional": False,
            "decoder_hidden_size": 1000,
            "decoder_layers": 4,
            "bridge": "concat",
            "attention": "luong",
            "score": "general",
            "input_feeding": True,
        },
        # Cho et al. (2014) / Sutskever et al. (2014) style, no attention, GRU.
        "cho": {
            "embedding_dim": 620,
            "cell": "gru",
            "encoder_hidden_size": 1000,
            "bidirectional": False,
            "decoder_hidden_size": 1000,
            "bridge": "projection",
            "attention": None,
        },
    }

    def __post_init__(self, **kwargs):
        kwargs.setdefault("is_encoder_decoder", True)
        super().__post_init__(**kwargs)  # type checks of @strict run first
        self.is_encoder_decoder = True
        if self.decoder_hidden_size is None:
            self.decoder_hidden_size = self.encoder_hidden_size * self.num_directions
        self.validate_fields()

    def validate_fields(self) -> None:
        """Raise ``ValueError`` naming the field and the allowed values for any bad setting."""
        check_field_rules(self)  # the rules declared on the fields; those between fields:
        if self.input_feeding and self.attention != "luong":
            raise ValueError(
                f"input_feeding needs attention='luong'; got attention={self.attention!r}"
            )
        if self.bridge == "concat":
            wanted = self.encoder_hidden_size * self.num_directions
            if self.decoder_hidden_size != wanted or self.decoder_layers != self.encoder_layers:
                raise ValueError(
                    "bridge='concat' needs decoder_hidden_size == encoder_hidden_size × directions "
                    f"({wanted}) and decoder_layers == encoder_layers ({self.encoder_layers}); got "
                    f"decoder_hidden_size={self.decoder_hidden_size}, "
                    f"decoder_layers={self.decoder_layers} (use bridge='projection' or 'zeros')"
                )
        if self.attention is not None:
            score_cls = SCORES[self.attention_score]
            if score_cls.same_dim and self.decoder_hidden_size != self.annotation_size:
                raise ValueError(
                    f"score {self.attention_score!r} needs decoder_hidden_size == "
                    "encoder_hidden_size "
                    f"× directions; got {self.decoder_hidden_size} and {self.annotation_size} (use "
                    "'general', 'additive', 'deep', 'biased_general', 'activated_general' or "
                    "'location', or change the sizes)"
                )
        if self.score_kwargs is not None and not all(isinstance(k, str) for k in self.score_kwargs):
            raise ValueError(
                f"score_kwargs must map option names to values; got {self.score_kwargs}"
            )

    @property
    def num_directions(self) -> int:
        """2 for a bidirectional encoder, else 1."""
        return 2 if self.bidirectional else 1

    @property
    def annotation_size(self) -> int:
        """Size of the encoder outputs (the attention keys and values): hidden × directions."""
        return self.encoder_hidden_size * self.num_directions

    @property
    def attention_score(self) -> str | None:
        """The score in use: ``score`` or the attention type's default (None without attention)."""
        if self.attention is None:
            return None
        return self.score or DEFAULT_SCORES[self.attention]

    def attention_score_kwargs(self) -> dict:
        """Options passed to the score: ``score_kwargs`` plus ``attention_size`` (additive /
        deep ``hidden_size``) and ``max_source_positions`` (location ``max_length``)."""
        options = dict(self.score_kwargs or {})
        score = self.attention_score
        if score in ("additive", "deep"):
            options.setdefault("hidden_size", self.attention_size or self.decoder_hidden_size)
        if score == "location":
            options.setdefault("max_length", self.max_source_positions)
        return options


__all__ = ["ATTENTIONS", "BRIDGES", "CELL_TYPES", "BahdanauConfig"]
