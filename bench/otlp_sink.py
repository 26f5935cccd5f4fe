"""A local OTLP/HTTP trace receiver for the benchmarks, in its own process (its CPU is not the
server's): POST /v1/traces takes protobuf exports, decoded with opentelemetry-proto so each span
is counted; GET /count answers what it took, as JSON.

    python -m bench.otlp_sink --host 127.0.0.1 --port 4318
"""

from __future__ import annotations

import argparse
import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

_lock = threading.Lock()
_taken = {"requests": 0, "spans": 0, "bytes": 0}


class Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans = sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
        with _lock:
            _taken["requests"] += 1
            _taken["spans"] += spans
            _taken["bytes"] += len(body)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_GET(self) -> None:
        with _lock:
            answer = json.dumps(_taken).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    ThreadingHTTPServer((args.host, args.port), Sink).serve_forever()


if __name__ == "__main__":
    main()
