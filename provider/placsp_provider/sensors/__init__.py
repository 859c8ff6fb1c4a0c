"""Sensors of the PLACSP provider (Airflow task SDK)."""
