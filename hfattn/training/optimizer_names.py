"""The optimizers a recipe may name (``training.optimizer``), without torch: the recipe checks
read them before torch is imported; :data:`hfattn.training.optim.OPTIMIZERS` maps each to its
class."""

OPTIMIZER_NAMES = ("adamw", "nadam", "rmsprop", "radam", "sgd", "muon")
"""``adamw``; ``nadam`` (Géron's char-RNN); ``rmsprop`` (Chollet's Transformer); ``radam``
(Liu et al. 2020, rectified Adam); ``sgd``; ``muon`` (Jordan et al. 2024: Muon on the hidden
matrices, AdamW on the rest)."""
WITHOUT_BETAS = ("rmsprop", "sgd")
"""The optimizers that take no Adam ``betas`` (``training.betas`` is refused with them)."""

__all__ = ["OPTIMIZER_NAMES", "WITHOUT_BETAS"]
