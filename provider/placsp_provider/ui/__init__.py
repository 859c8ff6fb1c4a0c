"""The operators' view in the Airflow UI (issue 35): an Airflow plugin whose FastAPI app the API server
mounts at `/placsp`, shown in the UI's navigation as "PLACSP" (`plugin.py`)."""
