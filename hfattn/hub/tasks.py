"""Which task a saved model folder belongs to, from what the folder says about itself.

The facts themselves (pipeline tag, Auto class, usage snippet, intended use, Space app) are
each task's ``card`` (:class:`~hfattn.tasks.TaskInfo`, in ``hfattn/tasks/<name>.py``):
adding a task module adds its entry here.
"""

from __future__ import annotations

from ..tasks import TaskInfo, all_tasks


def task_infos() -> dict[str, TaskInfo]:
    """``pipeline_tag`` → card facts of every registered task."""
    return {task.card.pipeline_tag: task.card for task in all_tasks()}


def task_for_architectures(architectures: list[str] | None) -> TaskInfo:
    """The task of a model from ``config.architectures`` (e.g. ``CharRNNForCausalLM``).

    Raises:
        ValueError: naming the architectures and the supported class-name suffixes.
    """
    infos = task_infos().values()
    for name in architectures or ():
        for info in infos:
            if name.endswith(info.architecture_suffixes):
                return info
    suffixes = ", ".join(s for info in infos for s in info.architecture_suffixes)
    raise ValueError(
        f"config.json 'architectures' is {architectures!r}: cannot tell the task; "
        f"expected a class name ending in one of {suffixes}"
    )


def task_for_peft(task_type: str | None) -> TaskInfo:
    """The task of a PEFT adapter from its ``task_type``.

    Raises:
        ValueError: naming the value and the supported ``task_type`` values.
    """
    by_type = {info.peft_task_type: info for info in task_infos().values() if info.peft_task_type}
    if task_type not in by_type:
        raise ValueError(
            f"adapter_config.json 'task_type' is {task_type!r}; "
            f"expected one of {', '.join(by_type)}"
        )
    return by_type[task_type]


__all__ = ["TaskInfo", "task_for_architectures", "task_for_peft", "task_infos"]
