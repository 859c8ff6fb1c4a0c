"""OpenLineage for the PLACSP tasks: what each task read and wrote, named as Spark names it.

The operators' `get_openlineage_facets_*` delegate to the module of their kind of task; `guard` keeps
lineage from ever failing a task. Importing the package itself imports nothing. See docs/lineage.md.
"""
