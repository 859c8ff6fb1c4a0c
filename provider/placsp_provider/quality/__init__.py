"""Data contracts and quality checks of the lake (docs/data-quality.md).

`contract` loads and validates the ODCS contracts into typed `Rule`s; `engine` evaluates them without
a JVM (delta-rs opens, DuckDB computes); `volume` judges the daily entry count against a Prophet
forecast; `results` is the `quality_results` table every check appends to; `run` is one dataset's
check end to end; `report` one HTML page per dataset.

Nothing here imports Airflow; heavy libraries (duckdb, deltalake, pyarrow, prophet, matplotlib) are
imported inside functions.
"""
