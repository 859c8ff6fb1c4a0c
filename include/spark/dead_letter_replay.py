"""spark-submit entry point of the dead-letter replay (DeadLetterReplayOperator submits this file).

The job itself lives in `placsp_provider.spark.replay_job`, shipped to the cluster as a zip
(`--py-files`) by the operator, so this file stays a two-liner.
"""

import sys

from placsp_provider.spark.replay_job import main

if __name__ == "__main__":
    sys.exit(main())
