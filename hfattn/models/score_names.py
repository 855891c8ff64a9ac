"""The names of the attention scores (:data:`hfattn.models.scores.SCORES`), without torch.

Only the standard library is imported, and nothing else of hfattn: a recipe's ``model:``
section is checked against these names before torch is imported
(:func:`hfattn.recipes.model_section.check_model_choices` reads the tuple from the file's
source, :func:`hfattn.common.models_source.models_literal`, nothing executed), and
``save_pretrained`` copies it next to the configurations that use it (``trust_remote_code``). Which
config field of each model type takes one is :data:`hfattn.common.families.SCORE_FIELDS`.
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

__all__ = ["SCORE_NAMES"]
