"""``hfattn.export`` and ``hfattn.plotting``."""
