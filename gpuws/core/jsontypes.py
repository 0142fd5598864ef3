"""JSON as a type: what `json.loads` gives and `json.dumps` takes (`--json` output, records)."""

from __future__ import annotations

from typing import TypeAlias

JsonScalar: TypeAlias = "bool | int | float | str | None"
JsonValue: TypeAlias = "JsonScalar | list[JsonValue] | dict[str, JsonValue]"
JsonObject: TypeAlias = "dict[str, JsonValue]"  # one JSON object (a `--json` document, a record)
