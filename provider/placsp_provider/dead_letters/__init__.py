"""Dead letters outside Spark: counts read straight from the Delta table, and threshold checks on them.

`stats` never imports Airflow and never starts a JVM; the sensor, the trigger and the CLI use it.
"""
