"""Benchmarks of the PLACSP provider, run by `make bench` (`python -m benchmarks.run`; see benchmarks/run.py)."""
