# Airflow DAG from the installed provider; safe mode parses only files naming both "airflow" and "dag".
from placsp_provider.dags.placsp_dead_letter_reprocess import dag  # noqa: F401
