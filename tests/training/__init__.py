"""``hfattn.training`` and ``hfattn.evaluation``: the engine, resume, faults, interrupts, metrics."""
