"""A refusal the protocol's SDK never saw, as JSON-RPC clients (MCP's, A2A's) read one."""

from __future__ import annotations

from fastapi import HTTPException
from fastapi.responses import JSONResponse
from starlette.responses import Response

INVALID_REQUEST, INTERNAL_ERROR = -32600, -32603


def jsonrpc_refusal(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """A JSON-RPC error with no id, with the HTTP status (and headers) /assist would answer with."""
    code = INTERNAL_ERROR if status >= 500 else INVALID_REQUEST
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def jsonrpc_refusal_of(refused: Exception) -> Response | None:
    """An HTTPException (admission's, a dependency's) as a JSON-RPC error; None for anything else."""
    if isinstance(refused, HTTPException):
        return jsonrpc_refusal(refused.status_code, str(refused.detail), dict(refused.headers or {}))
    return None
