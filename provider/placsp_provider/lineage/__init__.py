"""OpenLineage for the PLACSP tasks: what each task read and wrote, named as Spark names it.

The Airflow OpenLineage listener (`apache-airflow-providers-openlineage`) calls the operators'
`get_openlineage_facets_on_start/complete/failure`; those delegate here. Nothing in this package is
imported by a DAG file or by the Spark job, and importing the package itself imports nothing.

- `naming`: dataset namespaces and names (`file` + absolute path, as the OpenLineage Spark listener
  names local files and Delta tables; `https://<host>` + path for the PLACSP feed).
- `facets`: the custom `placsp_deadLetters` run facet and its JSON Schema.
- `datasets`: input/output datasets with their facets (schema, statistics, data quality).
- `extract`, `silver`, `sensor`, `replay`: the `OperatorLineage` of each kind of task.
- `spark`: the spark-submit `--conf` that puts the OpenLineage Spark listener on the job, with the
  transport and the parent job (the Airflow task run) of its events.
- `guard`: lineage problems log a warning and give empty lineage; they never fail a task.

See docs/lineage.md.
"""
