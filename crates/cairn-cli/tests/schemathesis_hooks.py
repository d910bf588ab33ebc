"""schemathesis hooks for the fuzz run of `cairn serve` (crates/cairn-cli/tests/serve.rs):
`POST /v1/import` takes JSONL (`application/x-ndjson`), a media type schemathesis has no
serializer for. The generated body (a string, per /openapi.json) goes on the wire as its text."""

import schemathesis
from schemathesis.transport.serialization import serialize_binary


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    if isinstance(value, str):
        return {"data": value.encode("utf-8")}
    return {"data": serialize_binary(value)}
