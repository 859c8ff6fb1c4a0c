"""Input and output datasets with their facets: schema, output statistics, data quality.

Schemas come from the same explicit Arrow schemas the Spark job writes (`ingest/tables.table_schema`),
with types spelled as the OpenLineage Spark listener spells Spark's (`long`, `timestamp`,
`decimal(38,6)`, `array` with an `_element` child), so both sides describe a table the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from placsp_provider.lake_storage import LakePath
from placsp_provider.lineage.naming import DatasetName, lake_table

if TYPE_CHECKING:
    import pyarrow as pa
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import DatasetFacet, InputDatasetFacet, OutputDatasetFacet
    from openlineage.client.generated.schema_dataset import SchemaDatasetFacet, SchemaDatasetFacetFields


def input_dataset(
    name: DatasetName,
    *,
    facets: Mapping[str, DatasetFacet] | None = None,
    input_facets: Mapping[str, InputDatasetFacet] | None = None,
) -> InputDataset:
    from openlineage.client.event_v2 import InputDataset

    return InputDataset(
        namespace=name.namespace, name=name.name, facets=dict(facets or {}), inputFacets=dict(input_facets or {})
    )


def output_dataset(
    name: DatasetName,
    *,
    rows: int | None = None,
    size: int | None = None,
    files: int | None = None,
    facets: Mapping[str, DatasetFacet] | None = None,
) -> OutputDataset:
    """An output; with `rows`/`size`/`files` it carries `outputStatistics` (rows and bytes written)."""
    from openlineage.client.event_v2 import OutputDataset
    from openlineage.client.generated.output_statistics_output_dataset import OutputStatisticsOutputDatasetFacet

    output_facets: dict[str, OutputDatasetFacet] = {}
    if rows is not None or size is not None or files is not None:
        output_facets["outputStatistics"] = OutputStatisticsOutputDatasetFacet(
            rowCount=rows, size=size, fileCount=files
        )
    return OutputDataset(
        namespace=name.namespace, name=name.name, facets=dict(facets or {}), outputFacets=output_facets
    )


def lake_input(
    lake: str | LakePath, table: str, input_facets: Mapping[str, InputDatasetFacet] | None = None
) -> InputDataset:
    """A lake table read, with its `schema`."""
    schema = {"schema": table_schema_facet(table)}
    return input_dataset(lake_table(lake, table), facets=schema, input_facets=input_facets)


def lake_output(
    lake: str | LakePath, table: str, *, rows: int | None = None, files: int | None = None
) -> OutputDataset:
    """A lake table written, with its `schema` (and `outputStatistics` with `rows` or `files`)."""
    schema = {"schema": table_schema_facet(table)}
    return output_dataset(lake_table(lake, table), rows=rows, files=files, facets=schema)


def table_schema_facet(table: str) -> SchemaDatasetFacet:
    """`schema` of a lake table, from its explicit Arrow schema (nested fields included)."""
    from openlineage.client.generated.schema_dataset import SchemaDatasetFacet

    from placsp_provider.ingest.tables import table_schema

    return SchemaDatasetFacet(fields=[_field(f.name, f.type) for f in table_schema(table)])


def _field(name: str, arrow_type: pa.DataType) -> SchemaDatasetFacetFields:
    import pyarrow as pa
    from openlineage.client.generated.schema_dataset import SchemaDatasetFacetFields

    from placsp_provider.ingest.tables import spark_type_name

    children: list[SchemaDatasetFacetFields] = []
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        children = [_field("_element", arrow_type.value_type)]
    elif pa.types.is_struct(arrow_type):
        children = [_field(arrow_type.field(i).name, arrow_type.field(i).type) for i in range(arrow_type.num_fields)]
    elif pa.types.is_map(arrow_type):
        children = [_field("key", arrow_type.key_type), _field("value", arrow_type.item_type)]
    return SchemaDatasetFacetFields(name=name, type=spark_type_name(arrow_type), fields=children)
