#!/usr/bin/env bash
# Write the Airflow UI login from the environment into SimpleAuthManager's password file, then run the
# given command (the API server: `with-ui-login.sh airflow api-server`).
# Without this, SimpleAuthManager invents a password and prints it in the log; with it the login is
# AIRFLOW_ADMIN_USER / AIRFLOW_ADMIN_PASSWORD from .env (docs/docker-compose.md). The user list itself
# comes from AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS.
set -euo pipefail

: "${AIRFLOW_ADMIN_USER:?set AIRFLOW_ADMIN_USER (see .env.example)}"
: "${AIRFLOW_ADMIN_PASSWORD:?set AIRFLOW_ADMIN_PASSWORD (see .env.example)}"
: "${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:?set AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE}"

python - <<'PY'
import json
import os

# Created 0600 from the start: the file holds a password in clear (SimpleAuthManager's format).
path = os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as passwords:
    json.dump({os.environ["AIRFLOW_ADMIN_USER"]: os.environ["AIRFLOW_ADMIN_PASSWORD"]}, passwords)
    passwords.write("\n")
PY

exec "$@"
