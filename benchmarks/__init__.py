"""Benchmarks of the PLACSP provider, run by `make bench` (`python -m benchmarks.run`).

- `benchmarks.pagegen`: realistic feed pages built from the real bundled entries, with injected
  corruptions and their ground truth (also meant for tests and for the Silver benchmark).
- `benchmarks.bench_extract`: Bronze extraction over loopback HTTP, throughput and peak memory.
- `benchmarks.run`: runs every registered benchmark, prints the tables, writes docs/benchmarks.md.
"""
