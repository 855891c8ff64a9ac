"""What the launcher of this process (``torchrun``, ``accelerate launch``, an MPI launcher) says
about it, read from the environment alone: the command line reads it before torch or
Accelerate is imported.

- :func:`accelerate_launch_command`: the documented ``accelerate launch`` command, with the
  options that keep its launcher from printing six lines of defaults it filled in.
- :func:`process_rank`: the process's global rank, from the variables Accelerate reads
  (:data:`RANK_VARIABLES`); 0 for a process started alone.
- :func:`lone_launch_warning`: ``accelerate launch --num_processes N`` that ran one process.
  On a machine without GPUs (with or without ``--cpu``) Accelerate's launcher starts several
  processes only for an MPI host file (or DeepSpeed, FSDP, TPUs); otherwise its one-process
  launcher runs the command once, with ``MASTER_ADDR`` and ``MASTER_PORT`` set (it sets them
  when ``--num_processes`` or ``--num_machines`` is above 1) and no world size.
- :func:`end_process_group`: the process group of a launched run closed before the process
  exits.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping

RANK_VARIABLES = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK")
"""Where a launcher puts the global rank, in the order Accelerate reads them (torchrun and
``accelerate launch --multi_gpu``: ``RANK``; MPI launchers: the others)."""
SIZE_VARIABLES = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
"""Where a launcher that started several processes puts their number."""
ACCELERATE_LAUNCH_VARIABLE = "ACCELERATE_DYNAMO_BACKEND"
"""A variable that every ``accelerate launch`` sets for the processes it starts."""


ACCELERATE_LAUNCH_OPTIONS = "--num_machines 1 --mixed_precision no --dynamo_backend no"
"""The ``accelerate launch`` options that, with ``--num_processes``, leave its launcher nothing
to fill in by default: without them (and without ``accelerate config``) it prints six lines of
"The following values were not passed to `accelerate launch`". The run's precision and
compilation are the recipe's (``training.mixed_precision``, ``training.compile``: hfattn gives
them to Accelerate and torch itself), whatever these say."""


def accelerate_launch_command(arguments: str = "train RECIPE", processes: str = "1") -> str:
    """The ``accelerate launch`` command line of ``hfattn ARGUMENTS`` on ``processes`` GPUs
    (``--multi_gpu`` above one) with :data:`ACCELERATE_LAUNCH_OPTIONS`: the launcher warns about
    nothing."""
    several = "" if processes == "1" else "--multi_gpu "
    return (
        f"accelerate launch {several}--num_processes {processes} {ACCELERATE_LAUNCH_OPTIONS} "
        f"-m hfattn {arguments}"
    )


def cpu_processes_command(arguments: str = "train RECIPE") -> str:
    """The command that starts N CPU processes of ``hfattn ARGUMENTS`` (torchrun, which
    Accelerate joins as one process group)."""
    return f"ACCELERATE_USE_CPU=1 torchrun --standalone --nproc_per_node N -m hfattn {arguments}"


def process_rank(environ: Mapping[str, str] | None = None) -> int:
    """This process's global rank: the first of :data:`RANK_VARIABLES` set to an integer in
    ``environ`` (default ``os.environ``), else 0 (a process started alone)."""
    environ = os.environ if environ is None else environ
    for name in RANK_VARIABLES:
        try:
            return int(environ[name])
        except (KeyError, ValueError):
            continue
    return 0


def lone_launch_warning(
    environ: Mapping[str, str] | None = None, argv: list[str] | None = None
) -> str | None:
    """The one-line warning for a process that ``accelerate launch`` was asked to start
    several of (``--num_processes`` or ``--num_machines`` above 1) and started alone (its
    one-process launcher: ``MASTER_ADDR`` and ``MASTER_PORT`` set, none of
    :data:`SIZE_VARIABLES`), naming the command that starts N CPU processes (``argv``,
    default ``sys.argv``: the hfattn command's arguments); ``None`` for any other process."""
    environ = os.environ if environ is None else environ
    launched = ACCELERATE_LAUNCH_VARIABLE in environ
    asked_several = "MASTER_ADDR" in environ and "MASTER_PORT" in environ
    if not launched or not asked_several or any(environ.get(n) for n in SIZE_VARIABLES):
        return None
    arguments = shlex.join((sys.argv if argv is None else argv)[1:]) or "train RECIPE"
    return (
        "accelerate launch was asked for several processes and started one: on CPUs its "
        "launcher starts several only for an MPI host file (else for GPUs, TPUs, DeepSpeed or "
        "FSDP); this run trains in one process. Start N CPU processes with "
        f"`{cpu_processes_command(arguments)}`"
    )


def end_process_group() -> None:
    """Destroy ``torch.distributed``'s default process group when this process set one up (a
    run under ``torchrun`` or ``accelerate launch``), as the command's last step: a process
    that exits with it open may abort in its exit (gloo's threads: ``terminate called without
    an active exception``, exit status -6) instead of returning its status. Imports nothing:
    a command that never loaded ``torch.distributed`` has no group to close."""
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        distributed.destroy_process_group()


__all__ = [
    "ACCELERATE_LAUNCH_OPTIONS",
    "ACCELERATE_LAUNCH_VARIABLE",
    "accelerate_launch_command",
    "RANK_VARIABLES",
    "SIZE_VARIABLES",
    "cpu_processes_command",
    "end_process_group",
    "lone_launch_warning",
    "process_rank",
]
