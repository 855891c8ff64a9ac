"""Sub-commands of the ``hfattn`` CLI, one module each with ``register(subparsers)``."""
