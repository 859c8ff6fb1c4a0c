"""Dead letters outside Spark: counts read straight from the Delta table, and threshold checks on them;
a corrected record written back by hand (`fix`). Never Airflow, never a JVM (import-linter contracts).
"""
