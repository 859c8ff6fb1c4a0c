"""The Silver ingest's engine-neutral core (docs/architecture.md): the request (`request`), staging a
page (`staging`), the tallies and what they decide (`tally`, `batch`), the write rules as data
(`rules`), the run summary (`summary`), the engine choice and the parser and writer interfaces
(`engines`), and `run.ingest`, the one entry. It imports neither pyspark nor a writer."""
