"""The names of the attention scores (:data:`hfattn.models.scores.SCORES`) and distributions
(:data:`hfattn.models.distributions.DISTRIBUTIONS`), without torch.

Only the standard library is imported, and nothing else of hfattn: a recipe's ``model:``
section is checked against these names before torch is imported (the config fields that take
one declare it, ``choice("additive", SCORE_NAMES)``, read from the source by
:func:`hfattn.common.models_source.config_field_rules`, nothing executed), and
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

DISTRIBUTION_NAMES = ("softmax", "sparsemax", "entmax15", "sigmoid", "normalize")
"""Every attention distribution's name, in the order of
:data:`hfattn.models.distributions.DISTRIBUTIONS`."""

__all__ = ["DISTRIBUTION_NAMES", "SCORE_NAMES"]
