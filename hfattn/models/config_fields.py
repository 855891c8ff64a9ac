"""The fields of each hfattn config class and the value rules its ``__post_init__`` applies, as
plain data (standard library only, no import): the recipe checks read them with
:func:`hfattn.common.models_source.models_literal` (``ast.literal_eval``, nothing executed) and
refuse a misspelt or invalid ``model:`` field before torch is imported. A test keeps every list
equal to what the config classes accept (``tests/recipes/test_early_refusals.py``).
"""

CONFIG_CLASSES = {
    "char-rnn": "CharRNNConfig",
    "bahdanau": "BahdanauConfig",
    "vaswani": "VaswaniConfig",
    "rnn-classifier": "RNNClassifierConfig",
}
"""``model_type`` → the name of its config class."""

PRETRAINED_CONFIG_FIELDS = (
    "transformers_version",
    "architectures",
    "output_hidden_states",
    "return_dict",
    "dtype",
    "chunk_size_feed_forward",
    "is_encoder_decoder",
    "id2label",
    "label2id",
    "problem_type",
)
"""The fields every config class inherits from ``transformers``' ``PretrainedConfig``, first in
``dataclasses.fields`` order."""

CONFIG_FIELDS = {
    "char-rnn": (
        "vocab_size",
        "embedding_dim",
        "hidden_size",
        "num_layers",
        "cell",
        "dropout",
        "tie_word_embeddings",
        "initializer_range",
        "use_cache",
        "pad_token_id",
        "unk_token_id",
        "bos_token_id",
        "eos_token_id",
    ),
    "bahdanau": (
        "vocab_size",
        "embedding_dim",
        "share_encoder_decoder_embeddings",
        "tie_word_embeddings",
        "cell",
        "encoder_hidden_size",
        "encoder_layers",
        "bidirectional",
        "decoder_hidden_size",
        "decoder_layers",
        "bridge",
        "attention",
        "score",
        "score_kwargs",
        "distribution",
        "attention_size",
        "input_feeding",
        "dropout",
        "label_smoothing",
        "max_source_positions",
        "initializer_range",
        "use_cache",
        "pad_token_id",
        "unk_token_id",
        "bos_token_id",
        "eos_token_id",
        "decoder_start_token_id",
    ),
    "vaswani": (
        "vocab_size",
        "encoder_layers",
        "decoder_layers",
        "d_model",
        "num_heads",
        "head_dim",
        "ffn_dim",
        "activation",
        "dropout",
        "attention_dropout",
        "activation_dropout",
        "embedding_dropout",
        "head_dropout",
        "max_position_embeddings",
        "position_embedding",
        "norm_position",
        "scale_embedding",
        "share_encoder_decoder_embeddings",
        "tie_word_embeddings",
        "label_smoothing",
        "init_method",
        "attention_score",
        "attention_distribution",
        "attention_score_params",
        "attention_bias",
        "layer_norm_eps",
        "chollet_cross_attention_mask",
        "initializer_range",
        "use_cache",
        "pad_token_id",
        "unk_token_id",
        "bos_token_id",
        "eos_token_id",
        "decoder_start_token_id",
    ),
    "rnn-classifier": (
        "vocab_size",
        "embedding_dim",
        "freeze_embeddings",
        "cell",
        "hidden_size",
        "num_layers",
        "bidirectional",
        "pooling",
        "attention_score",
        "attention_distribution",
        "attention_score_params",
        "input_dropout",
        "rnn_dropout",
        "dropout",
        "pad_token_id",
    ),
}
"""``model_type`` → the fields its config class declares after :data:`PRETRAINED_CONFIG_FIELDS`
(``dataclasses.fields`` order)."""

POSITIVE_INT_FIELDS = {
    "char-rnn": ("embedding_dim", "hidden_size", "num_layers"),
    "bahdanau": (
        "embedding_dim",
        "encoder_hidden_size",
        "encoder_layers",
        "decoder_hidden_size",
        "decoder_layers",
        "max_source_positions",
    ),
    "vaswani": (
        "encoder_layers",
        "decoder_layers",
        "d_model",
        "num_heads",
        "head_dim",
        "ffn_dim",
        "max_position_embeddings",
    ),
    "rnn-classifier": ("embedding_dim", "hidden_size", "num_layers"),
}
"""``model_type`` → the fields that must be positive integers."""

UNIT_INTERVAL_FIELDS = {
    "char-rnn": ("dropout",),
    "bahdanau": ("dropout", "label_smoothing"),
    "vaswani": (
        "dropout",
        "attention_dropout",
        "activation_dropout",
        "head_dropout",
        "label_smoothing",
    ),
    "rnn-classifier": ("input_dropout", "rnn_dropout", "dropout"),
}
"""``model_type`` → the fields that must lie in [0, 1) (dropouts, label smoothing)."""

CHOICES = {
    "char-rnn": {"cell": ("gru", "lstm", "rnn")},
    "bahdanau": {
        "cell": ("gru", "lstm"),
        "bridge": ("concat", "projection", "zeros"),
        "attention": (None, "bahdanau", "luong"),
    },
    "vaswani": {
        "activation": (
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
        ),
        "position_embedding": ("sinusoidal", "learned"),
        "norm_position": ("post", "pre"),
        "init_method": ("xavier", "normal", "t-fixup"),
    },
    "rnn-classifier": {
        "cell": ("gru", "lstm"),
        "pooling": ("last", "attention"),
    },
}
"""``model_type`` → field → the values it may take. The attention score fields are left out:
their names are :data:`hfattn.models.score_names.SCORE_NAMES`, checked first
(:func:`hfattn.recipes.model_section.check_model_choices`)."""
