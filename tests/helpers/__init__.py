"""Helpers shared by the tests and the benchmarks (``from tests.helpers.X import ...``)."""
