"""The Optuna study of a sweep (``hfattn sweep``): its storage, its sampler and pruner, the
trials it hands out and the trials of processes that died.

Optuna (Akiba et al. 2019, "Optuna: A Next-generation Hyperparameter Optimization Framework")
keeps the study in a database (:class:`optuna.storages.RDBStorage`): SQLite in the sweep folder
by default, or any database URL that several processes or machines reach. Each process asks
the database for its next trial (:meth:`optuna.Study.ask`): no trial is handed out twice.

A trial records who runs it (host, process id and start time: :func:`claim`) and beats
(:func:`heartbeat`, Optuna's ``record_heartbeat``). A RUNNING trial whose process is gone is
failed, never counted as a result, and a retry with the same parameters and the same run folder
is queued (:func:`retry_later`), which the next process to ask takes first and resumes from the
folder's newest checkpoint: a trial of this machine whose process no longer runs at once
(:func:`fail_dead_trials`), a trial of any machine once its heartbeat is
:data:`GRACE_PERIOD_S` old (:func:`optuna.storages.fail_stale_trials`).
"""

from __future__ import annotations

import inspect
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from ..recipes import RecipeError
from ..recipes.search_space import SearchParam
from .sweep_setup import OPTUNA_MISSING

try:
    import optuna
    from optuna.trial import TrialState
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError
except ImportError:
    raise ImportError(OPTUNA_MISSING) from None

logger = logging.getLogger(__name__)

STUDY_FILE = "study.db"
"""The SQLite database of a sweep's study in its folder, unless ``--storage`` names another."""
HEARTBEAT_INTERVAL_S = 30
"""Seconds between two heartbeats of a running trial."""
GRACE_PERIOD_S = 120
"""Seconds without a heartbeat after which another process takes a running trial for dead."""
SETTINGS_ATTR = "hfattn_sweep"
"""The study's user attribute that records what it searches: the space, the metric and its
direction, and the recipe (a continuation must search the same)."""
OWNER_ATTR, FOLDER_ATTR, RETRY_ATTR = "owner", "run_folder", "retry_of"
"""A trial's user attributes: the process that runs it, its run folder (relative to the sweep
folder) and, for a retry, the number of the trial it retries."""
STORAGE_ATTEMPTS = 5
"""Opens of the study database before its error is the sweep's."""
DONE = (TrialState.COMPLETE, TrialState.PRUNED)
"""The states of a trial that counts as a result."""


def storage_url(storage: str | None, folder: Path) -> str:
    """``storage``, or the SQLite database :data:`STUDY_FILE` in the sweep ``folder``."""
    return storage or f"sqlite:///{(Path(folder) / STUDY_FILE).resolve()}"


class StudyStorageError(RecipeError):
    """The study's database cannot be opened; the message names it (its password hidden) and
    the database's own words."""


def _created_meanwhile(err: Exception) -> bool:
    """Whether ``err`` is the refusal of a database whose tables another process creates at the
    same moment (its version row inserted twice, a table that exists already, a lock)."""
    words = str(err)
    return isinstance(err, IntegrityError) or (
        isinstance(err, OperationalError) and ("already exists" in words or "locked" in words)
    )


def _storage_error(url: str, err: Exception) -> str:
    """``--storage URL: cannot open the study's database (CAUSE)``, the URL's password
    hidden."""
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except SQLAlchemyError:
        shown = url
    cause = str(getattr(err, "orig", None) or err).splitlines()[0]
    return f"--storage {shown}: cannot open the study's database ({cause})"


def open_storage(url: str) -> optuna.storages.RDBStorage:
    """The study database at ``url`` with heartbeats on; a trial found stale is queued again
    (:func:`retry_later`). SQLite waits for its lock rather than failing at once when several
    processes write; of processes that create a new database together, one creates its tables
    and the others, refused meanwhile, open it again (:data:`STORAGE_ATTEMPTS`).

    Raises:
        StudyStorageError: the database cannot be opened (a bad URL, no driver installed for
            it, a server not reached).
    """
    engine = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else None
    stale = "heartbeat_stale_trial_callback"  # Optuna 5; Optuna 4 calls it failed_trial_callback
    if stale not in inspect.signature(optuna.storages.RDBStorage).parameters:
        stale = "failed_trial_callback"
    for attempt in range(STORAGE_ATTEMPTS):
        try:
            return optuna.storages.RDBStorage(
                url,
                engine_kwargs=engine,
                heartbeat_interval=HEARTBEAT_INTERVAL_S,
                grace_period=GRACE_PERIOD_S,
                **{stale: retry_later},
            )
        except (SQLAlchemyError, ImportError) as err:  # a bad URL; no driver for its database
            if not _created_meanwhile(err) or attempt == STORAGE_ATTEMPTS - 1:
                raise StudyStorageError(_storage_error(url, err)) from None
            time.sleep(0.2 * (attempt + 1))


def open_study(storage, name: str, direction: str, seed: int | None = None) -> optuna.Study:
    """The study ``name`` in ``storage``, created or continued, with the TPE sampler (Bergstra
    et al. 2011; ``constant_liar`` so that parallel processes spread their trials; ``seed``
    fixes its draws) and the median pruner (:func:`pruner`)."""
    sampler = optuna.samplers.TPESampler(n_startup_trials=5, constant_liar=True, seed=seed)
    return optuna.create_study(
        storage=storage,
        study_name=name,
        direction=direction,
        sampler=sampler,
        pruner=pruner(),
        load_if_exists=True,
    )


def pruner() -> optuna.pruners.BasePruner:
    """The median stopping rule (Golovin et al. 2017, "Google Vizier"): at a validation, a
    trial whose best value so far is worse than the median of the other trials' values at the
    same step stops, once 3 trials have finished. It needs no more trials than a sweep of a
    dozen has, compares trials at the steps they were validated at (``eval_every``), and
    prunes from the first validation on."""
    return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=0)


def suggest(trial: optuna.Trial, param: SearchParam):
    """The value of ``param`` for ``trial`` (its fixed value in a queued retry)."""
    if param.distribution == "choice":
        return trial.suggest_categorical(param.name, list(param.choices))
    if param.distribution == "int_uniform":
        return trial.suggest_int(param.name, param.low, param.high)
    log = param.distribution == "log_uniform"
    return trial.suggest_float(param.name, param.low, param.high, log=log)


def _this_process() -> dict:
    """The host, process id and process start time of this process."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": psutil.Process().create_time(),
    }


def claim(trial: optuna.Trial) -> str:
    """Record on ``trial`` (just asked for) the process that runs it and its run folder
    (``trial-0007``; a retry keeps the folder of the trial it retries); returns the folder."""
    folder = trial.user_attrs.get(FOLDER_ATTR) or f"trial-{trial.number:04d}"
    trial.set_user_attr(OWNER_ATTR, _this_process())
    trial.set_user_attr(FOLDER_ATTR, folder)
    return folder


def retry_later(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    """Queue a retry of the failed ``trial``: the same parameters and run folder, which the
    process that takes it resumes from its newest checkpoint."""
    folder = trial.user_attrs.get(FOLDER_ATTR) or f"trial-{trial.number:04d}"
    original = trial.user_attrs.get(RETRY_ATTR, trial.number)
    study.enqueue_trial(trial.params, user_attrs={FOLDER_ATTR: folder, RETRY_ATTR: original})
    logger.info("trial %d was cut short: queued again, to resume from %s", trial.number, folder)


def _dead_here(owner) -> bool:
    """Whether ``owner`` (a trial's :data:`OWNER_ATTR`) is a process of this host that no
    longer runs (its id gone, or taken by a process started at another time)."""
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return False
    try:
        return psutil.Process(owner["pid"]).create_time() != owner.get("started")
    except (psutil.NoSuchProcess, KeyError, TypeError):
        return True


def fail_dead_trials(study: optuna.Study, storage) -> None:
    """Fail every RUNNING trial whose process is gone and queue its retry: at once for a
    process of this host (:func:`_dead_here`), after :data:`GRACE_PERIOD_S` without a
    heartbeat for any other (:func:`optuna.storages.fail_stale_trials`). Of several processes
    that find the same trial, one fails and queues it."""
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if not _dead_here(trial.user_attrs.get(OWNER_ATTR)):
            continue
        try:
            failed = storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # another process failed it first
        if failed:
            retry_later(study, trial)
    optuna.storages.fail_stale_trials(study)


@contextmanager
def heartbeat(storage, trial: optuna.Trial) -> Iterator[None]:
    """Record ``trial``'s heartbeat now and every :data:`HEARTBEAT_INTERVAL_S` seconds while
    the block runs (a thread: the training loop does not wait for it)."""
    stop = threading.Event()

    def beat() -> None:
        """Record a heartbeat every interval until the block ends."""
        while not stop.wait(HEARTBEAT_INTERVAL_S):
            storage.record_heartbeat(trial._trial_id)

    storage.record_heartbeat(trial._trial_id)
    thread = threading.Thread(target=beat, name="hfattn-sweep-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def counted(study: optuna.Study) -> int:
    """The trials that are results (:data:`DONE`) or running now."""
    return len(study.get_trials(deepcopy=False, states=(*DONE, TrialState.RUNNING)))


__all__ = [
    "DONE",
    "StudyStorageError",
    "GRACE_PERIOD_S",
    "HEARTBEAT_INTERVAL_S",
    "STUDY_FILE",
    "claim",
    "counted",
    "fail_dead_trials",
    "heartbeat",
    "open_storage",
    "open_study",
    "pruner",
    "retry_later",
    "storage_url",
    "suggest",
]
