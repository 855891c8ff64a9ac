"""Loading a model folder for a command, with one clear error instead of a deep traceback."""

from __future__ import annotations

from pathlib import Path


class ModelLoadError(ValueError):
    """The model folder (or repo id) cannot be loaded; the message names it and why."""


def looks_like_path(name: str) -> bool:
    """Whether ``name`` is meant as a local folder (``./x``, ``/x``, ``~/x``, ``a/b/c``), so a
    missing one is an error at once rather than a Hub lookup."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or Path(name).exists()


def load_model_and_tokenizer(name: str, auto_class: str):
    """``(model, tokenizer)`` of a folder or Hub repo id through ``transformers.<auto_class>``,
    in eval mode.

    Raises:
        ModelLoadError: a local folder that does not exist, or files that cannot be read
            (truncated weights, a garbage config or tokenizer); the message names the folder.
    """
    import transformers

    import hfattn  # noqa: F401  (registers the model types)

    if looks_like_path(name) and not Path(name).expanduser().is_dir():
        raise ModelLoadError(f"model folder {name!r} does not exist")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(name)
        model = getattr(transformers, auto_class).from_pretrained(name)
    except Exception as exc:  # noqa: BLE001 (safetensors, json, tokenizers each raise their own)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(f"cannot load the model in {name!r}: {reason}") from None
    return model.eval(), tokenizer


__all__ = ["ModelLoadError", "load_model_and_tokenizer", "looks_like_path"]
