"""OpenLineage for the PLACSP tasks: what each task read and wrote, named as Spark names it.

The Airflow OpenLineage listener calls the operators' `get_openlineage_facets_on_start/complete/failure`;
they delegate to the module of their kind of task (`extract`, `silver`, `sensor`, `quality`, `replay`,
`completeness`, `maintenance`), built on `naming` (dataset names shared with the Spark listener),
`datasets` and `facets`. `spark` puts the OpenLineage Spark listener on a job; `guard` keeps lineage
from ever failing a task. Nothing here is imported by a DAG file or by the Spark job, and importing
the package itself imports nothing. See docs/lineage.md.
"""
