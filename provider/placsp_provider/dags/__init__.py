"""The provider's DAGs: one module per DAG, named as its dag_id, each defining `dag`.

Airflow finds them through a file of its DAG folder that imports one, e.g. `dags/placsp_daily.py` of
the repository (README, "Install into your Airflow"). The DAG processor records that file as the
DAG's fileloc and parses it in a fresh process, so what a module reads at parse time (settings such
as PLACSP_DEAD_LETTER_SEVERITY) comes from that process's environment. Like every file the processor
parses, these modules import only `airflow.sdk` and the provider's thin modules at module level
(`make lint`'s import contracts).
"""

# The dag_id of every DAG here (one module each): who may read any of them may see the PLACSP view
# (placsp_provider.ui.access).
DAG_IDS = (
    "placsp_backfill",
    "placsp_completeness",
    "placsp_daily",
    "placsp_dead_letter_monitor",
    "placsp_dead_letter_replay",
    "placsp_dead_letter_reprocess",
    "placsp_maintenance",
    "placsp_silver_entries_export",
)
