"""Dead letters outside Spark: counts read straight from the Delta table, and threshold checks on them;
a corrected record written back by hand (`fix`).

`stats` and `fix` never import Airflow and never start a JVM; the sensor, the trigger and the CLI use `stats`.
"""
