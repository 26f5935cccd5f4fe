"""Log lines: a field that could fake another field or line is quoted."""

import logging

from sentient_assist.server.logs import JsonFormatter, TextFormatter


def record(fields: dict) -> logging.LogRecord:
    entry = logging.LogRecord("sentient_assist.access", logging.INFO, __file__, 1, "request", None, None)
    entry.fields = fields
    return entry


def test_plain_tokens_stay_plain_and_anything_else_is_quoted():
    line = TextFormatter().format(record({"path": "/assist", "status": 200, "odd": "/x\n2026 request_id=FAKE"}))
    assert " path=/assist status=200 " in line
    assert "\n" not in line and 'odd="/x\\n2026 request_id=FAKE"' in line


def test_json_lines_carry_the_fields():
    import json

    entry = json.loads(JsonFormatter().format(record({"request_id": "r1", "status": 499})))
    assert entry["request_id"] == "r1" and entry["status"] == 499 and entry["time"].endswith("Z")
