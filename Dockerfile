# syntax=docker/dockerfile:1
# The Airflow image of the docker-compose stack (docker-compose.yaml, docs/docker-compose.md): the
# official Airflow image plus Java 17, this provider installed from the lock and the pinned Spark
# jars. Every Airflow service runs it; Silver tasks run spark-submit from it in client mode.
# Build context: the repository root (.dockerignore sends only what is copied below).

# Airflow and Python as in requirements/constraints.txt and pyproject.toml (tests/compose checks it).
FROM apache/airflow:3.3.2-python3.11

USER root
# Java 17: in client mode the Spark driver's JVM runs inside the Airflow task (the base is Debian).
# The base image's shell has pipefail on, hence grep without -q (-q could SIGPIPE java).
RUN set -eux; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends openjdk-17-jre-headless; \
    apt-get autoremove -yqq --purge; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/*; \
    java -version 2>&1 | grep 'version "17\.' >/dev/null
# The project lives at a fixed path. The lake is no folder of the image: docker-compose.yaml names
# an S3 bucket (PLACSP_LAKE), which the tasks and the Spark executors all reach.
RUN install -d -o airflow -g 0 -m 0775 /opt/placsp
USER airflow

# PLACSP_SPARK_JARS stays set at run time: the jars fetched below are the ones every task uses.
ENV PLACSP_SPARK_JARS=/opt/placsp/spark-jars \
    AIRFLOW__CORE__DAGS_FOLDER=/opt/placsp/dags

COPY --chown=airflow:0 pyproject.toml README.md /opt/placsp/
COPY --chown=airflow:0 requirements/constraints.txt /opt/placsp/requirements/constraints.txt
COPY --chown=airflow:0 docker/check_lock.py /opt/placsp/docker/check_lock.py
COPY --chown=airflow:0 provider/ /opt/placsp/provider/
# Every version comes from the lock; naming apache-airflow as well keeps pip from replacing the base
# image's Airflow. Editable, as in a checkout; the DAGs, the Spark jobs and the data contracts are
# inside the package, found through it.
RUN --mount=type=cache,target=/tmp/.cache/pip,uid=50000,gid=0 \
    pip install -c /opt/placsp/requirements/constraints.txt "apache-airflow==${AIRFLOW_VERSION}" -e "/opt/placsp[all]" \
    && python /opt/placsp/docker/check_lock.py /opt/placsp/requirements/constraints.txt \
        apache-airflow --pyproject /opt/placsp/pyproject.toml --extra all
# The pinned jars (Delta, OpenLineage), resolved now into PLACSP_SPARK_JARS; Ivy's cache stays out
# of the image. Nothing is downloaded when a task runs.
RUN --mount=type=cache,target=/opt/placsp/ivy,uid=50000,gid=0 \
    python -m placsp_provider.spark.jars fetch

# The DAG folder: one import line per DAG of the package installed above (placsp_provider/dags).
COPY --chown=airflow:0 dags/ /opt/placsp/dags/
COPY --chown=airflow:0 include/ /opt/placsp/include/
# The Spark driver's class archive (placsp_provider/spark/class_archive.py): every Silver task's JVM
# then starts ~3 s sooner. A build that cannot make one says so and the image runs without it.
RUN python -m placsp_provider.spark.class_archive build
COPY --chown=airflow:0 docker/airflow/with-ui-login.sh /opt/placsp/bin/with-ui-login.sh
