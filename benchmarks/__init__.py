"""hfattn's benchmarks: each ``bench_*.py`` runs as a module from the repository root
(``python -m benchmarks.bench_vaswani``); ``python -m benchmarks.run_all`` runs them all.
What the scripts share is in :mod:`benchmarks.lib`."""
