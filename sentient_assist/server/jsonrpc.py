"""What the faces whose protocol is JSON-RPC over HTTP (MCP's, A2A's) share: their SDK reads the
body itself, and a refusal the SDK never saw is a JSON-RPC error with no id."""

from __future__ import annotations

from fastapi import HTTPException
from fastapi.responses import JSONResponse
from starlette.responses import Response

from sentient_assist.runtime.errors import InputError
from sentient_assist.server.face import Face

INVALID_REQUEST, INTERNAL_ERROR = -32600, -32603


def jsonrpc_refusal(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """A JSON-RPC error with no id, with the HTTP status (and headers) /assist would answer with."""
    code = INTERNAL_ERROR if status >= 500 else INVALID_REQUEST
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def jsonrpc_refusal_of(refused: Exception) -> Response | None:
    """An HTTPException (admission's, a dependency's) or an InputError (the face's own check of
    the body) as a JSON-RPC error; None for anything else."""
    if isinstance(refused, InputError):
        return jsonrpc_refusal(refused.status, str(refused))
    if isinstance(refused, HTTPException):
        return jsonrpc_refusal(refused.status_code, str(refused.detail), dict(refused.headers or {}))
    return None


class JsonRpcFace(Face):
    """A face whose SDK answers JSON-RPC: handed the body whole, its answer bounded by the time
    limit (server/admission.py), its refusals JSON-RPC errors."""

    reads_body_whole = True

    def refusal(self, refused: Exception) -> Response | None:
        return jsonrpc_refusal_of(refused)
