# Airflow DAG from the installed provider; safe mode parses only files naming both "airflow" and "dag".
from placsp_provider.dags.placsp_completeness import dag  # noqa: F401
