"""The PLACSP page parser in plain Python (lxml, pyarrow; no Spark, no Airflow).

`page_split` cuts a page into records at the byte level, `page_parser` turns each record into Silver
rows or one dead letter, `entry_fields` reads an entry's fields by namespace URI, `validation` holds
the strict value checks, `silver_schema` the explicit Arrow schemas of the tables. The Spark jobs
(`spark/`), the replay, the completeness check and the benchmarks all call the same code.
"""
