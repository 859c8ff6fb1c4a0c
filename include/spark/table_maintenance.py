"""spark-submit entry point of table maintenance (PlacspMaintainOperator submits this file).

The job itself lives in `placsp_provider.spark.maintenance`, shipped to the cluster as a zip
(`--py-files`) by the operator, so this file stays a two-liner.
"""

import sys

from placsp_provider.spark.maintenance import main

if __name__ == "__main__":
    sys.exit(main())
