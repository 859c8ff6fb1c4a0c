"""Data contracts and quality checks of the lake (docs/data-quality.md).

- `contract`: ODCS 3.x contracts (`include/contracts/<table>.odcs.yaml`) loaded, validated against the
  ODCS JSON Schema, and turned into typed `Rule`s; a bad contract is a `ContractError` naming the file,
  the rule and the reason.
- `engine`: the rules evaluated without a JVM: delta-rs opens the dataset's partition of each table
  (file pruning), DuckDB runs the rules over the Arrow dataset (projection and filter pushdown).
- `results`: the `quality_results` Delta table every check appends to.
- `volume`: the daily entry count against a Prophet forecast interval (volume anomaly).
- `report`: one self-contained HTML page per dataset (rules, latest results, the volume chart).

Nothing here imports Airflow; heavy libraries (duckdb, deltalake, pyarrow, prophet, matplotlib) are
imported inside functions.
"""
