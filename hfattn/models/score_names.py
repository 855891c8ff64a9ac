"""The names of the attention scores (:data:`hfattn.models.scores.SCORES`) and the config
fields that take one, without torch.

Only the standard library is imported, and nothing else of hfattn: a recipe's ``model:``
section is checked against these names before torch is imported
(:func:`hfattn.model_section.check_model_choices` reads this file by path), and
``save_pretrained`` copies it next to the configurations that use it (``trust_remote_code``).
"""

SCORE_NAMES = (
    "dot",
    "scaled_dot",
    "general",
    "biased_general",
    "activated_general",
    "additive",
    "deep",
    "location",
    "cosine",
    "kernel",
    "gaussian",
    "boxcar",
    "euclidean",
    "std_euclidean",
    "minkowski",
    "manhattan",
    "chebyshev",
    "mahalanobis",
)
"""Every attention score's ``name``, in the order of :data:`hfattn.models.scores.SCORES`."""

SCORE_FIELDS = {
    "bahdanau": "score",
    "vaswani": "attention_score",
    "rnn-classifier": "attention_score",
}
"""``model_type`` → the config field that names its attention score (one of
:data:`SCORE_NAMES`; ``score: null`` is the Bahdanau / Luong attention's default)."""

__all__ = ["SCORE_FIELDS", "SCORE_NAMES"]
