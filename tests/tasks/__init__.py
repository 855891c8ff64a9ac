"""``hfattn.tasks``: each task end to end on tiny models."""
