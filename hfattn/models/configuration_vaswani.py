"""Configuration of the Vaswani et al. (2017) Transformer encoder-decoder
(``model_type="vaswani"``)."""

from typing import ClassVar

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

from .config_checks import PresetsMixin, check_field_rules, choice, positive_int, rate
from .score_names import DISTRIBUTION_NAMES, SCORE_NAMES

NORM_POSITIONS = ("post", "pre")
INIT_METHODS = ("xavier", "normal", "t-fixup")
POSITION_EMBEDDINGS = ("sinusoidal", "learned")
"""The positional encodings, by their name in
:data:`hfattn.models.positional.POSITIONAL_ENCODINGS`."""
ACTIVATIONS = (
    "gelu",
    "gelu_10",
    "gelu_fast",
    "gelu_new",
    "gelu_python",
    "gelu_pytorch_tanh",
    "gelu_python_tanh",
    "gelu_accurate",
    "hardswish",
    "laplace",
    "leaky_relu",
    "linear",
    "mish",
    "quick_gelu",
    "relu",
    "relu2",
    "relu6",
    "sigmoid",
    "silu",
    "sqrtsoftplus",
    "swish",
    "tanh",
    "prelu",
    "xielu",
)
"""The FFN activations, by their name in ``transformers.activations.ACT2FN``."""


@strict
class VaswaniConfig(PresetsMixin, PreTrainedConfig):
    r"""Configuration for [`VaswaniForConditionalGeneration`], the "Attention is all you need"
    encoder-decoder.

    Each encoder layer is ``x ← Norm(x + Drop(MHA(x, x, x)))`` then
    ``x ← Norm(x + Drop(FFN(x)))`` with ``FFN(x) = act(x W₁ + b₁) W₂ + b₂`` (post-LN, the
    paper); ``norm_position="pre"`` gives ``x ← x + Drop(MHA(Norm(x)))`` (Xiong et al.) with a
    final norm per stack. Decoder layers add a causal self-attention before the
    cross-attention ``MHA(Q = decoder, K = V = encoder output)``.

    Args:
        vocab_size: one id space shared by source and target (the tokenizer encodes both).
        encoder_layers / decoder_layers: ``N`` of each stack.
        d_model: model width.
        num_heads: ``h``.
        head_dim: per-head size of queries, keys and values; default ``d_model // num_heads``
            (the paper's ``d_k = d_v = d_model / h``). Chollet and Géron give each head
            ``key_dim = d_model``, so ``num_heads × head_dim`` need not equal ``d_model``.
        ffn_dim: inner size of the position-wise feed-forward network.
        activation: the FFN's non-linearity, one of ``ACTIVATIONS`` (names of
            ``transformers.activations.ACT2FN``).
        dropout: residual dropout (on each sub-layer's output before the addition).
        attention_dropout: dropout on the attention weights.
        activation_dropout: dropout inside the FFN, after the activation.
        embedding_dropout: dropout on ``embeddings + positions`` (default ``dropout``).
        head_dropout: dropout on the decoder output before the vocabulary projection (Chollet's
            0.5).
        max_position_embeddings: number of positions of a learned table; a sinusoidal
            encoding is computed on the fly beyond it.
        position_embedding: ``"sinusoidal"`` (fixed) or ``"learned"``.
        norm_position: ``"post"`` (paper, seeds) or ``"pre"``.
        scale_embedding: multiply token embeddings by ``√d_model`` (paper §3.4).
        share_encoder_decoder_embeddings: one embedding matrix for source and target tokens.
        tie_word_embeddings: the decoder embedding matrix is the output projection.
        label_smoothing: ``ε_ls`` of the training loss (0.1 in the paper).
        init_method: ``"xavier"`` (Glorot-uniform linears, ``N(0, d^-½)`` embeddings),
            ``"normal"`` (``N(0, initializer_range)``, transformers' default) or ``"t-fixup"``
            (Huang et al. 2020: no LayerNorm, no warmup; Xavier linears, ``N(0, d^-½)``
            embeddings, then the decoder's value / output / FFN matrices and the embeddings
            scaled by ``(9 N_dec)^-¼`` and the encoder's by ``0.67 N_enc^-¼``).
        attention_score / attention_distribution / attention_score_params: any score and
            distribution of ``hfattn.models.attention`` by name; ``scaled_dot`` + softmax (the
            default) runs through the transformers attention interface (eager / sdpa / flash).
        attention_bias: biases in the Q, K, V and output projections.
        layer_norm_eps: epsilon of the LayerNorms.
        chollet_cross_attention_mask: reproduce the decoder of Chollet's Keras example (*Deep
            Learning with Python*, ch. 11), whose cross-attention is masked with the *target's*
            causal-and-padding mask laid over the source positions, and whose self-attention
            ignores target padding. Off by default;
            only meaningful when source and target lengths coincide, as in that example.
        initializer_range: standard deviation of ``init_method="normal"``.
        use_cache: return the key/value cache in ``generate``.
    """

    model_type = "vaswani"
    keys_to_ignore_at_inference: ClassVar[list[str]] = ["cache"]
    attribute_map: ClassVar[dict[str, str]] = {
        "num_hidden_layers": "decoder_layers",
        "hidden_size": "d_model",
        "num_attention_heads": "num_heads",
        "attention_key_dim": "head_dim",
    }

    vocab_size: int = positive_int(1000)
    encoder_layers: int = positive_int(6)
    decoder_layers: int = positive_int(6)
    d_model: int = positive_int(512)
    num_heads: int = positive_int(8)
    head_dim: int | None = positive_int(None)
    ffn_dim: int = positive_int(2048)
    activation: str = choice("relu", ACTIVATIONS)
    dropout: float | int = rate(0.1)
    attention_dropout: float | int = rate(0.0)
    activation_dropout: float | int = rate(0.0)
    embedding_dropout: float | int | None = rate(None)
    head_dropout: float | int = rate(0.0)
    max_position_embeddings: int = positive_int(512)
    position_embedding: str = choice("sinusoidal", POSITION_EMBEDDINGS)
    norm_position: str = choice("post", NORM_POSITIONS)
    scale_embedding: bool = True
    share_encoder_decoder_embeddings: bool = True
    tie_word_embeddings: bool = True
    label_smoothing: float | int = rate(0.0)
    init_method: str = choice("xavier", INIT_METHODS)
    attention_score: str = choice("scaled_dot", SCORE_NAMES)
    attention_distribution: str | None = choice(None, DISTRIBUTION_NAMES)
    attention_score_params: dict | None = None
    attention_bias: bool = True
    layer_norm_eps: float | int = 1e-5
    chollet_cross_attention_mask: bool = False
    initializer_range: float | int = 0.02
    use_cache: bool = True
    pad_token_id: int | None = 0
    unk_token_id: int | None = 1
    bos_token_id: int | None = 2
    eos_token_id: int | None = 3
    decoder_start_token_id: int | None = 2

    PRESETS: ClassVar[dict[str, dict]] = {
        # Vaswani et al. (2017), Transformer base: N=6, d 512, h 8, d_ff 2048, P_drop 0.1,
        # ε_ls 0.1, shared embeddings tied to the output, sinusoidal positions
        # (trained with Adam β=(0.9, 0.98) and Noam warmup 4000: see the recipe).
        "paper-base": {
            "encoder_layers": 6,
            "decoder_layers": 6,
            "d_model": 512,
            "num_heads": 8,
            "ffn_dim": 2048,
            "dropout": 0.1,
            "label_smoothing": 0.1,
            "position_embedding": "sinusoidal",
            "norm_position": "post",
        },
        # fairseq's transformer_iwslt_de_en (Ott et al. 2019, fairseq; its IWSLT'14 de-en
        # example, 160k pairs): 6+6 layers, d 512, 4 heads, FFN 1024, dropout 0.3, attention
        # and activation dropout 0.1, label smoothing 0.1, post-LN, sinusoidal positions,
        # embeddings shared by source, target and output layer (one joint vocabulary); the
        # sizes the small-corpus literature starts from (Araabi & Monz 2020). Its inverse
        # square root schedule after 4,000 warmup steps and 4,096-token batches are training
        # settings: the recipe's.
        "iwslt": {
            "encoder_layers": 6,
            "decoder_layers": 6,
            "d_model": 512,
            "num_heads": 4,
            "ffn_dim": 1024,
            "dropout": 0.3,
            "attention_dropout": 0.1,
            "activation_dropout": 0.1,
            "label_smoothing": 0.1,
            "position_embedding": "sinusoidal",
            "norm_position": "post",
            "share_encoder_decoder_embeddings": True,
            "tie_word_embeddings": True,
        },
        # Chollet's Keras model (Deep Learning with Python, ch. 11): 1+1 layers, embed 256, 8
        # heads of key_dim 256, FFN 2048, learned positions, dropout 0.5 before the head, no √d
        # scale, separate source/target embeddings and output layer (19,960,216 parameters at
        # vocab 15000, length 20).
        "chollet": {
            "encoder_layers": 1,
            "decoder_layers": 1,
            "d_model": 256,
            "num_heads": 8,
            "head_dim": 256,
            "ffn_dim": 2048,
            "dropout": 0.0,
            "head_dropout": 0.5,
            "position_embedding": "learned",
            "max_position_embeddings": 20,
            "scale_embedding": False,
            "share_encoder_decoder_embeddings": False,
            "tie_word_embeddings": False,
            "norm_position": "post",
        },
        # Géron, HOML ch. 16: 2+2 layers, d 128, 8 heads of key_dim 128, FFN 128, dropout
        # 0.1, sinusoidal positions.
        "geron": {
            "encoder_layers": 2,
            "decoder_layers": 2,
            "d_model": 128,
            "num_heads": 8,
            "head_dim": 128,
            "ffn_dim": 128,
            "dropout": 0.1,
            "attention_dropout": 0.1,
            "position_embedding": "sinusoidal",
            "max_position_embeddings": 50,
            "norm_position": "post",
        },
    }

    def __post_init__(self, **kwargs):
        kwargs.setdefault("is_encoder_decoder", True)
        super().__post_init__(**kwargs)  # type checks of @strict run first
        self.is_encoder_decoder = True
        check_field_rules(self)  # the rules declared on the fields; those between fields:
        if self.head_dim is None:
            if self.d_model % self.num_heads:
                raise ValueError(
                    f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads}) "
                    "when head_dim is not given; set head_dim to give each head its own size"
                )
            self.head_dim = self.d_model // self.num_heads
        if self.position_embedding == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"d_model must be even for sinusoidal positions; got {self.d_model}")

    @property
    def use_layer_norm(self) -> bool:
        """T-Fixup removes every LayerNorm; the other initialisations keep them."""
        return self.init_method != "t-fixup"

    @property
    def input_dropout(self) -> float:
        """Dropout on ``embeddings + positions``: ``embedding_dropout``, else ``dropout``."""
        return self.dropout if self.embedding_dropout is None else self.embedding_dropout


__all__ = ["ACTIVATIONS", "INIT_METHODS", "NORM_POSITIONS", "POSITION_EMBEDDINGS", "VaswaniConfig"]
