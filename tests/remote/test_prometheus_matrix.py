"""A range matrix decoded series by series gives what decoding the whole body gives."""

from __future__ import annotations

import json

from gpuws.remote.prometheus import _matrix_series


def body(result: list[dict[str, object]], **extra: object) -> str:
    # Prometheus' own layout: compact, status first, then data with resultType before result.
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}, **extra},
                      separators=(",", ":"))


SERIES = [
    {"metric": {"gpu": "0", "Hostname": "node-a"}, "values": [[1700000000, "12.5"], [1700000060, "13"]]},
    # A label value that looks like the head of the result list, quotes and brackets included.
    {"metric": {"gpu": "1", "Hostname": 'odd "resultType":"matrix","result":[ ] , host'},
     "values": [[1700000000, "NaN"]]},
    {"metric": {"gpu": "2", "Hostname": "node-b"}, "values": []},
]


def test_series_decoded_one_by_one_equal_the_whole_body() -> None:
    text = body(SERIES, warnings=["a warning after the result"])
    decoded = _matrix_series(text)
    assert decoded is not None
    assert list(decoded) == json.loads(text)["data"]["result"]


def test_whitespace_between_series_and_an_empty_matrix() -> None:
    text = body(SERIES).replace("},{", "} ,\n {")
    assert list(_matrix_series(text) or []) == SERIES
    assert list(_matrix_series(body([])) or ["not empty"]) == []


def test_errors_and_other_layouts_go_the_whole_body_way() -> None:
    error = json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"})
    assert _matrix_series(error) is None
    assert _matrix_series('{"status":"success","data":{"resultType":"vector","result":[]}}') is None
    assert _matrix_series("<html>not Prometheus</html>") is None
    assert _matrix_series("") is None
