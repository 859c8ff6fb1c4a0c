"""The Silver ingest without Spark's Delta writes: the tables written by delta-rs (`deltalake`) under
`ingest.rules`, for a small batch parsed in this process (`delta-rs`: no JVM) and for a larger one
parsed by Spark's tasks (`spark+delta-rs`).

A Spark session, Delta's first table read and ten Delta commands cost a one-page ingest four times a
bare session; without a JVM it costs a quarter of one (decision 0029). Batches above
`PLACSP_DELTA_RS_WRITE_MAX_MB` (a backfill) go to Spark's MERGEs. Which one runs is
`ingest.engines.choose_engine`'s call; tests/spark/test_delta_rs_ingest.py holds the engines to equal
tables, row for row, and tests/reliability/test_delta_rs_ingest_killed.py kills the delta-rs run
after each of its commits.
"""
