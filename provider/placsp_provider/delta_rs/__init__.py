"""The Silver ingest without a JVM, for the small batches a daily run brings: pages parsed in this
process, the tables written by delta-rs (`deltalake`) under the rules of `spark.silver_merge`.

A Spark session, Delta's first table read and ten Delta commands cost a one-page ingest ~20 s,
four times a bare session; this path does the same page in ~3 s (docs/benchmarks.md, speed log).
Large batches (a backfill) go to Spark, which parses on every core of a cluster. Which one runs is
`silver_job.choose_engine`'s call; tests/delta_rs holds both engines to the same lake, row for row.
"""
