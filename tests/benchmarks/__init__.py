"""The benchmark scripts and their library (``benchmarks/``), on tiny sizes."""
