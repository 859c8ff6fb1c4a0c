"""Triggers of the PLACSP provider: they run in Airflow's triggerer, never in the Spark job."""
