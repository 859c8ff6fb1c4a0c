"""The PLACSP source as it really is: hardened XML, page scanning, HTTP client, chain walking.

Plain Python: no Airflow, no Spark. The hook, the CLI and the Spark job all build on it.
"""
