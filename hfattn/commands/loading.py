"""Loading a recipe or a model folder for a command, with one clear error instead of a deep
traceback: ``error: <message>`` on stderr and exit status 2 (:func:`report_error`).

A command that runs a recipe (``train``, ``baseline``) takes it as :func:`add_recipe_arguments`
defines (the YAML path and repeatable ``--set key=value`` overrides) and reads it with
:func:`load_recipe_or_report`.

Only safetensors weights are read: a folder (or Hub repo) whose weights are pickles
(``pytorch_model.bin``, ``*.pt``, ...) is refused, since unpickling can run arbitrary code,
unless the user opts in with ``--allow-pickle`` (:func:`allow_pickle` for library callers). A
truncated or corrupt ``config.json``, tokenizer or safetensors file is a
:class:`ModelLoadError` naming that file. hfattn's own architectures load from the installed
package (the Auto classes know them), so ``trust_remote_code`` is never needed.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

logger = logging.getLogger(__name__)

PICKLE_WEIGHTS = ("pytorch_model*.bin", "adapter_model.bin", "*.pt", "*.pth", "*.pkl")
"""Weight files that ``torch.load`` would unpickle (matched in the model folder)."""
CHECKED_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "*.safetensors",
)
"""Files read back one by one to name the culprit when loading fails."""

_ALLOW_PICKLE: ContextVar[bool] = ContextVar("hfattn_allow_pickle", default=False)


class ModelLoadError(ValueError):
    """The model folder (or repo id) cannot be loaded; the message names it and why."""


def report_error(err: BaseException | str, status: int = 2) -> int:
    """Print ``error: <err>`` to stderr and return ``status``, the command's exit status."""
    print(f"error: {err}", file=sys.stderr)
    return status


def add_recipe_arguments(
    parser: argparse.ArgumentParser,
    *,
    recipe_help: str,
    set_example: str,
    recipe_optional: bool = False,
) -> None:
    """Add the ``recipe`` path (described by ``recipe_help``; may be left out when
    ``recipe_optional``) and the repeatable ``--set KEY=VALUE`` overrides (``set_example`` is
    shown in their help) to ``parser``."""
    parser.add_argument("recipe", help=recipe_help, nargs="?" if recipe_optional else None)
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override a recipe field, e.g. --set {set_example} (repeatable)",
    )


def load_recipe_or_report(args: argparse.Namespace):
    """The validated recipe of ``args.recipe`` with the ``args.overrides`` applied, or ``None``
    after printing the error (a bad field, a missing file) as :func:`report_error` does."""
    from ..recipes import RecipeError, load_recipe

    try:
        return load_recipe(args.recipe, args.overrides)
    except (RecipeError, FileNotFoundError) as err:
        report_error(err)
        return None


@contextmanager
def allow_pickle(enabled: bool = True) -> Iterator[None]:
    """Within the block, :func:`load_model_and_tokenizer` accepts pickle weights when
    ``enabled`` (what ``--allow-pickle`` sets for a command)."""
    token = _ALLOW_PICKLE.set(enabled)
    try:
        yield
    finally:
        _ALLOW_PICKLE.reset(token)


def looks_like_path(name: str) -> bool:
    """Whether ``name`` is meant as a local folder (``./x``, ``/x``, ``~/x``, ``a/b/c``), so a
    missing one is an error at once rather than a Hub lookup."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or Path(name).exists()


def pickle_weights(folder: Path) -> list[Path]:
    """The pickle weight files (:data:`PICKLE_WEIGHTS`) directly in ``folder``, sorted."""
    return sorted({p for pattern in PICKLE_WEIGHTS for p in folder.glob(pattern) if p.is_file()})


def check_weights_are_safe(folder: Path, allowed: bool) -> None:
    """Refuse a local ``folder`` whose weights exist only as pickles (unless ``allowed``); warn
    that pickles next to safetensors weights are ignored.

    Raises:
        ModelLoadError: naming the pickle file and the ``--allow-pickle`` opt-in.
    """
    pickles = pickle_weights(folder)
    if not pickles or allowed:
        return
    if any(folder.glob("*.safetensors")):
        logger.warning(
            "%s: ignoring %s (pickle); the safetensors weights are loaded",
            folder,
            ", ".join(p.name for p in pickles),
        )
        return
    raise ModelLoadError(
        f"{pickles[0]} is a pickle file, which can run arbitrary code when loaded; hfattn reads "
        "only safetensors weights. Convert it where you trust it (save_pretrained writes "
        "model.safetensors), or pass --allow-pickle if you trust this file"
    )


def damaged_file(folder: Path) -> Path | None:
    """The first of the folder's :data:`CHECKED_FILES` that does not read back whole (JSON
    that does not parse, a safetensors file with a tensor that cannot be read), or ``None``."""
    from ..fileio import reads_back

    files = sorted({p for pattern in CHECKED_FILES for p in folder.glob(pattern) if p.is_file()})
    return next((file for file in files if not reads_back(file)), None)


def load_model_and_tokenizer(name: str, auto_class: str, *, allow_pickle: bool | None = None):
    """``(model, tokenizer)`` of a folder or Hub repo id through ``transformers.<auto_class>``,
    in eval mode, from safetensors weights only.

    Args:
        name: a local folder or a Hub repo id.
        auto_class: e.g. ``"AutoModelForCausalLM"``.
        allow_pickle: also accept pickle weights (``pytorch_model.bin``); default: the
            :func:`allow_pickle` setting (off).

    Raises:
        ModelLoadError: a local folder that does not exist, pickle weights without the opt-in,
            or files that cannot be read (truncated weights, a garbage config or tokenizer);
            the message names the file when one of them is damaged, else the folder.
    """
    import transformers

    import hfattn.models  # noqa: F401  (registers the model types: no trust_remote_code needed)

    allowed = _ALLOW_PICKLE.get() if allow_pickle is None else allow_pickle
    folder = Path(name).expanduser() if looks_like_path(name) else None
    if folder is not None:
        if not folder.is_dir():
            raise ModelLoadError(f"model folder {name!r} does not exist")
        check_weights_are_safe(folder, allowed)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(name)
        model = getattr(transformers, auto_class).from_pretrained(
            name, use_safetensors=None if allowed else True
        )
    except Exception as exc:  # noqa: BLE001 (safetensors, json, tokenizers each raise their own)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        damaged = damaged_file(folder) if folder is not None else None
        if damaged is not None:
            raise ModelLoadError(
                f"cannot load the model in {name!r}: {damaged} is truncated or corrupt ({reason})"
            ) from None
        if not allowed and "safetensors" in reason:
            reason += " (hfattn reads only safetensors weights; --allow-pickle accepts pickles)"
        raise ModelLoadError(f"cannot load the model in {name!r}: {reason}") from None
    return model.eval(), tokenizer


__all__ = [
    "PICKLE_WEIGHTS",
    "ModelLoadError",
    "add_recipe_arguments",
    "allow_pickle",
    "check_weights_are_safe",
    "damaged_file",
    "load_model_and_tokenizer",
    "load_recipe_or_report",
    "looks_like_path",
    "pickle_weights",
    "report_error",
]
