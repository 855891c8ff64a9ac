"""Publish a model folder (and optionally its Gradio Space) to the Hugging Face Hub.

One call to :func:`push_model_folder` validates everything first (repo id, folder, token),
stages the exact folder to upload (see :mod:`hfattn.hub.staging`), then creates the
repository and uploads the folder as a single commit (``HfApi.create_commit`` with every
file): a failed push leaves nothing half-committed. Server errors, timeouts and dropped
connections are retried with exponential backoff, at most :data:`RETRY_ATTEMPTS` tries per
call (``huggingface_hub`` does not retry a commit itself); a Hub that cannot be reached at all
(no network, a host name that does not resolve, nothing listening at ``HF_ENDPOINT``) fails at
once. A commit whose answer was lost
after the Hub applied it is committed again with the same files: every revision is
complete. The token never appears in logs, exceptions or cards.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from ..recipes.run_checks import NO_TOKEN, hub_token, repo_id_problem
from ..recipes.schema import LICENSE_FORM, LICENSE_ID
from ..storage.file_io import atomic_write_text
from ..storage.run_folder import RECIPE_FILE, resume_command
from ..storage.run_status import interrupted_run_message, training_shortfall
from .folder_inspection import ModelFolder, ModelFolderError, inspect_folder, verify_weights
from .space import SpaceError, app_dir_for, stage_space
from .staging import publish_dir, render_tree, stage_model

logger = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_ATTEMPTS = 4
"""Tries per Hub call (the first one included) before giving up."""
RETRY_BASE_DELAY_S = 2.0
"""Wait before the first retry; doubled after every failure, up to :data:`RETRY_MAX_DELAY_S`."""
RETRY_MAX_DELAY_S = 30.0
RETRY_STATUS_CODES = frozenset({408, 429, 500, 502, 503, 504})
REDACTED = "hf_***"


class HubPushError(RuntimeError):
    """A push was refused or failed; the message says why and never contains the token."""


def validate_repo_id(repo_id: str) -> str:
    """Return ``repo_id`` if it is ``owner/name`` as the Hub accepts it.

    Raises:
        HubPushError: naming the value and the allowed form.
    """
    problem = repo_id_problem(repo_id)
    if problem is not None:
        raise HubPushError(problem)
    return repo_id


def resolve_token(token: str | None = None) -> str:
    """The token to push with: ``token``, else ``$HF_TOKEN`` or the saved login.

    Raises:
        HubPushError: when there is none (checked before any upload work).
    """
    token = hub_token(token)
    if token is None:
        raise HubPushError(NO_TOKEN)
    return token


def scrub(text: str, token: str | None) -> str:
    """``text`` with every occurrence of ``token`` replaced by ``hf_***``."""
    return text.replace(token, REDACTED) if token else text


class _ScrubFilter(logging.Filter):
    """Rewrites log records so that the token never reaches a handler."""

    def __init__(self, token: str):
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.token in message:
            record.msg, record.args = scrub(message, self.token), None
        return True


@contextmanager
def scrubbed_logs(token: str) -> Iterator[None]:
    """Scrub ``token`` from every record reaching the root or ``huggingface_hub`` handlers."""
    scrubber = _ScrubFilter(token)
    handlers = {
        *logging.getLogger().handlers,
        *logging.getLogger("huggingface_hub").handlers,
        *logging.getLogger("hfattn").handlers,
    }
    for handler in handlers:
        handler.addFilter(scrubber)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(scrubber)


def _transient_exceptions() -> tuple[type[BaseException], ...]:
    """Network-level errors worth retrying (the HTTP client of huggingface_hub 1.x or 2.x)."""
    found: list[type[BaseException]] = [TimeoutError, ConnectionError]
    for name in ("httpx2", "httpx"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        found += [module.TimeoutException, module.NetworkError, module.RemoteProtocolError]
    return tuple(found)


def _unreachable_exceptions() -> tuple[type[BaseException], ...]:
    """Errors that mean no connection could be opened to the Hub at all (the host name does not
    resolve, nothing listens at the address, no route): retrying in seconds does not help."""
    found: list[type[BaseException]] = [ConnectionRefusedError, socket.gaierror]
    for name in ("httpx2", "httpx"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        found.append(module.ConnectError)
    return tuple(found)


def _describe(exc: BaseException) -> tuple[str, bool]:
    """A one-line description of a failed Hub call and whether it is worth retrying."""
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(exc, HfHubHTTPError) and exc.response is not None:
        status = exc.response.status_code
        detail = str(exc).splitlines()[0]
        if exc.server_message and exc.server_message not in detail:
            detail += f" ({exc.server_message.strip()})"
        if status in (401, 403):
            detail = (
                f"the Hub refused the token (HTTP {status}): check it has write access to the "
                f"namespace; {detail}"
            )
        return f"HTTP {status}: {detail}", status in RETRY_STATUS_CODES
    if isinstance(exc, _unreachable_exceptions()):
        from huggingface_hub import constants

        return (
            f"cannot reach the Hub at {_endpoint() or constants.ENDPOINT} "
            f"({type(exc).__name__}: {exc}); check the network connection and HF_ENDPOINT",
            False,
        )
    if isinstance(exc, _transient_exceptions()):
        return f"{type(exc).__name__}: {exc or 'timed out / connection lost'}", True
    return f"{type(exc).__name__}: {exc}", False


def call_with_retries(what: str, fn: Callable[[], T], token: str) -> T:
    """Run the Hub call ``fn``, retrying server errors and timeouts with exponential backoff.

    Raises:
        HubPushError: on a non-retryable error or once :data:`RETRY_ATTEMPTS` tries failed;
            the message names ``what`` and the last error, with the token scrubbed.
    """
    delay = RETRY_BASE_DELAY_S
    for attempt in range(1, RETRY_ATTEMPTS + 1):
        try:
            return fn()
        except Exception as exc:  # classified below; never re-raised: it may carry the token
            detail, retryable = _describe(exc)
            detail = scrub(detail, token)
        # Raised outside the except block so that the original error (whose request holds the
        # Authorization header) is not even attached as __context__.
        if not retryable:
            raise HubPushError(f"{what} failed: {detail}")
        if attempt == RETRY_ATTEMPTS:
            raise HubPushError(
                f"{what} failed after {RETRY_ATTEMPTS} attempts (last error: {detail}); "
                "nothing was committed by the failed step, re-run the push to try again"
            )
        logger.warning(
            "%s failed (%s); retrying in %.1fs (attempt %d/%d)",
            what,
            detail,
            delay,
            attempt + 1,
            RETRY_ATTEMPTS,
        )
        time.sleep(delay)
        delay = min(delay * 2, RETRY_MAX_DELAY_S)
    raise AssertionError("unreachable")


def _scrub_staged(root: Path, token: str | None) -> None:
    """Replace the token in every staged text file (a recipe could carry it by mistake)."""
    if not token:
        return
    for path in root.rglob("*"):
        if path.is_file() and path.suffix in (".md", ".json", ".yaml", ".yml", ".py", ".txt"):
            text = path.read_text(encoding="utf-8", errors="ignore")
            if token in text:
                logger.warning(
                    "%s contained the Hub token; it was replaced by %s", path.name, REDACTED
                )
                atomic_write_text(path, scrub(text, token))


def _endpoint() -> str | None:
    """``$HF_ENDPOINT`` read now (huggingface_hub reads it once, at import)."""
    return os.environ.get("HF_ENDPOINT") or None


KEPT_REPO_FILES = (".gitattributes",)
"""Files of a repository that a push never deletes (the Hub writes ``.gitattributes`` when it
creates a repository)."""


def commit_folder(
    api, repo_id: str, folder: Path, message: str, *, repo_type: str = "model", revision=None
):
    """Make ``repo_id`` (at ``revision``) hold exactly the files under ``folder``, as one
    commit: every file added, and every file the repository has that ``folder`` lacks
    (an ``adapter_config.json`` left by an earlier push of the adapter, before a push of the
    merged model) deleted, except :data:`KEPT_REPO_FILES`. The deleted paths are logged.

    ``HfApi.upload_folder`` splits large folders into several commits when ``hf_xet`` is
    installed; ``create_commit`` with the full list of operations is all-or-nothing.
    """
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    pushed = {
        path.relative_to(folder).as_posix(): path
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }
    present = api.list_repo_files(repo_id, repo_type=repo_type, revision=revision)
    stale = sorted(set(present) - set(pushed) - set(KEPT_REPO_FILES))
    if stale:
        logger.info("removing from %s what the pushed folder lacks: %s", repo_id, ", ".join(stale))
    operations = [
        *(CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(path))
          for name, path in pushed.items()),
        *(CommitOperationDelete(path_in_repo=name) for name in stale),
    ]  # fmt: skip
    return api.create_commit(
        repo_id=repo_id,
        repo_type=repo_type,
        operations=operations,
        commit_message=message,
        revision=revision,
    )


def _commit_message(folder) -> str:
    kind = folder.model_type or "model"
    return f"Upload {kind} {'adapter' if folder.is_adapter else 'model'} with hfattn"


def _print_dry_run(
    root: Path,
    repo_id: str,
    excluded: list[tuple[str, str]],
    space: bool,
    refusals: Sequence[str] = (),
) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    for refusal in refusals:
        console.print(f"[bold yellow]warning:[/] a real push is refused: {escape(refusal)}")
    console.print(render_tree(root, f"{root}  (dry run: nothing uploaded)"))
    console.print(
        f"model/ would be uploaded to [bold]{repo_id}[/] in one commit, which also deletes the "
        "repository's files that model/ lacks"
    )
    if space:
        console.print(f"space/ would be uploaded to the Space [bold]{repo_id}[/] (sdk gradio)")
    for name, reason in excluded:
        console.print(f"[dim]left out: {name} ({reason})")


def short_run_refusal(folder: str | Path) -> str | None:
    """Why a push of the run in ``folder`` needs ``--force`` (it stopped early:
    :func:`hfattn.storage.run_status.training_shortfall`, and the ways on), or ``None``."""
    shortfall = training_shortfall(folder)
    if shortfall is None:
        return None
    return (
        f"{folder}: {shortfall}. Continue it with `{resume_command(folder)} --set "
        "training.max_steps=N`, or publish it as it is with --force (its card says it is short)"
    )


def check_run_is_publishable(folder: str | Path, force: bool = False) -> None:
    """Refuse a training run that has no model to publish yet (interrupted), or that
    stopped early (:func:`short_run_refusal`) unless ``force``.

    Raises:
        HubPushError: saying at which step the run stands and what to do.
    """
    interrupted = interrupted_run_message(folder)
    if interrupted is not None:
        raise HubPushError(f"{interrupted}; then push it")
    refusal = None if force else short_run_refusal(folder)
    if refusal is not None:
        raise HubPushError(refusal)


def with_license(folder: ModelFolder, license: str | None) -> ModelFolder:
    """``folder`` with the card licence ``license`` (``hfattn push --license``) in place of its
    recipe's or its data's; ``folder`` itself when ``license`` is ``None``.

    Raises:
        HubPushError: ``license`` is not a Hub license id
            (:data:`hfattn.recipes.schema.LICENSE_FORM`).
    """
    if license is None:
        return folder
    if license == "other":
        raise HubPushError(
            "--license other needs the licence's name: set hub.license: other with "
            f"hub.license_name (and hub.license_link) in {folder.path / RECIPE_FILE} instead"
        )
    if not LICENSE_ID.fullmatch(license):
        raise HubPushError(f"--license: {license!r} is not {LICENSE_FORM}")
    hub = dataclasses.replace(
        folder.hub, license=license, license_name=None, license_link=None, license_source=None
    )
    return dataclasses.replace(folder, hub=hub)


def missing_license(folder: ModelFolder) -> str | None:
    """Why ``folder`` cannot be published without a licence (one line, naming the two ways to
    give one and their form), or ``None`` when its card has one."""
    if folder.hub.license is not None:
        return None
    source = folder.hub.data_source
    data = f"its data ({source!r})" if source else "its data (no recipe.yaml names it)"
    return (
        f"{folder.path}: no license for the model card: the recipe sets no hub.license and the "
        f"license of {data} is unknown; give one with `hfattn push --license ID` or in the "
        f"recipe (`--set hub.license=apache-2.0`), ID being {LICENSE_FORM}"
    )


def push_model_folder(
    folder: str | Path,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    token: str | None = None,
    space: bool = False,
    merge: bool = False,
    dry_run_dir: str | Path | None = None,
    force: bool = False,
    license: str | None = None,
) -> str:
    """Publish a saved model (or LoRA adapter) folder as the Hub model repository ``repo_id``.

    Args:
        folder: a ``save_pretrained`` folder with its tokenizer, or an hfattn training run
            (its ``recipe.yaml`` ``hub:`` section and ``eval_results.json`` feed the card).
        repo_id: ``owner/name``; the repository is created if needed.
        private: create the repository (and the Space) private.
        revision: branch to commit to (created from ``main`` if missing); default ``main``.
        token: Hub token; default ``$HF_TOKEN`` or the saved login. Not needed for a dry run.
        space: also create/update the Gradio Space ``repo_id`` that demos the model.
        merge: for a LoRA adapter folder, publish the merged full model instead of the adapter.
        dry_run_dir: write what would be uploaded to ``dry_run_dir/model`` (and ``/space``),
            print its tree and upload nothing.
        force: publish a run that stopped early
            (:func:`hfattn.storage.run_status.training_shortfall`; its card says so either way).
            A dry run previews such a run without it, with a warning that a real push is
            refused.
        license: the card's Hub license id, in place of the recipe's ``hub.license`` or the
            declared licence of its data
            (:class:`~hfattn.hub.folder_inspection.HubSettings`). A folder whose licence is still
            unknown is refused (a dry run only warns: its preview shows the card without one).

    Returns:
        The model repository URL (``{endpoint}/{repo_id}``).

    Raises:
        HubPushError: bad repo id, no token, an invalid folder (a run interrupted before it
            saved its model: the message gives its step and how to go on), a short run without
            ``force``, no known licence (:func:`missing_license`), or a Hub failure after
            retries.
        FileExistsError: ``dry_run_dir`` exists and is not empty.
    """
    from huggingface_hub import HfApi, constants

    validate_repo_id(repo_id)
    if dry_run_dir is not None and (
        Path(dry_run_dir).exists()
        and (not Path(dry_run_dir).is_dir() or any(Path(dry_run_dir).iterdir()))
    ):
        raise FileExistsError(
            f"dry-run output {dry_run_dir} exists and is not empty; pass a new folder"
        )
    check_run_is_publishable(folder, force or dry_run_dir is not None)  # a dry run previews
    try:
        model_folder = with_license(inspect_folder(folder), license)
        unlicensed = missing_license(model_folder)
        if unlicensed is not None and dry_run_dir is None:
            raise HubPushError(unlicensed)
        verify_weights(model_folder.path)
        if space:
            app_dir_for(model_folder.task)
    except (ModelFolderError, SpaceError, FileNotFoundError) as exc:
        raise HubPushError(str(exc)) from None
    if dry_run_dir is None:  # after the folder's checks: a wrong folder is named first
        token = resolve_token(token)
    endpoint = (_endpoint() or constants.ENDPOINT).rstrip("/")
    url = f"{endpoint}/{repo_id}"

    stage_parent = Path(dry_run_dir).resolve().parent if dry_run_dir is not None else None
    if stage_parent is not None:
        stage_parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".hfattn-push-", dir=stage_parent) as tmp:
        root = Path(tmp) / "staged"
        try:
            published, excluded = stage_model(
                model_folder, root / "model", repo_id, merge=merge, link=dry_run_dir is None
            )
            if space:
                stage_space(published, repo_id, root / "space")
        except (ModelFolderError, SpaceError) as exc:
            raise HubPushError(str(exc)) from None
        _scrub_staged(root, token)
        if dry_run_dir is not None:
            final = publish_dir(root, dry_run_dir)
            refusals = [unlicensed, None if force else short_run_refusal(folder)]
            _print_dry_run(final, repo_id, excluded, space, refusals=[r for r in refusals if r])
            return url

        api = HfApi(endpoint=endpoint, token=token, library_name="hfattn")
        with scrubbed_logs(token):
            repo_url = call_with_retries(
                f"creating model repo {repo_id}",
                lambda: api.create_repo(repo_id, private=private, exist_ok=True),
                token,
            )
            if revision and revision != "main":
                call_with_retries(
                    f"creating branch {revision!r} of {repo_id}",
                    lambda: api.create_branch(repo_id, branch=revision, exist_ok=True),
                    token,
                )
            commit = call_with_retries(
                f"uploading {folder} to {repo_id}",
                lambda: commit_folder(
                    api, repo_id, root / "model", _commit_message(published), revision=revision
                ),
                token,
            )
            logger.info("pushed %s to %s (%s)", folder, repo_url, commit.commit_url)
            if space:
                _push_space(api, repo_id, root / "space", private, token)
    return str(repo_url)


def _push_space(api, repo_id: str, space_dir: Path, private: bool, token: str) -> None:
    """Create the Gradio Space ``repo_id`` and upload ``space_dir`` as one commit."""
    space_url = call_with_retries(
        f"creating Space {repo_id}",
        lambda: api.create_repo(
            repo_id, repo_type="space", space_sdk="gradio", private=private, exist_ok=True
        ),
        token,
    )
    call_with_retries(
        f"uploading the Space {repo_id} (the model repo is already published)",
        lambda: commit_folder(
            api, repo_id, space_dir, "Upload Gradio demo with hfattn", repo_type="space"
        ),
        token,
    )
    logger.info("pushed the Space %s", space_url)
