"""``hfattn.cli``, ``hfattn.commands`` and ``hfattn.orchestration``: the commands as a user runs them."""
