"""A Streamable HTTP MCP server of the official Python SDK 1.x (mcp 1.30.0), which speaks only the
`initialize` era (2025-11-25 and earlier): a request of 2026-07-28 is refused.

Stateful (an MCP session opened by `initialize`, named by Mcp-Session-Id), answers as SSE streams
(the 1.x default), on 127.0.0.1. Prints one JSON line, {"url": "http://127.0.0.1:PORT/mcp"}, once
it accepts connections, then serves until killed, printing one more line for each HTTP request
as its answer starts: {"seen": {"httpMethod", "method" (JSON-RPC; null for a response or no
body), "response" ("result" or "error" when the body answers a request of the server's, else
null), "status", "protocolVersion" (the header), "session" (whether Mcp-Session-Id was sent)}};
and one line each time `confirm` hears back from the user: {"elicited": {"action", "confirmed"}}.

    python server_v1.py [--port PORT]      # 0 (the default): a free port

Tools:
  add(a, b)        the sum
  confirm(action)  asks the user with an elicitation/create request of its own, sent on the
                   call's stream while the call waits ("Confirm ACTION?", a form with a boolean
                   `confirmed`); "confirmed: ACTION" once accepted and confirmed, else
                   "not confirmed"
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from harness import recorded, serve
from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel, Field

server = FastMCP("python-sdk-1-test-server", host="127.0.0.1")


class Confirmation(BaseModel):
    confirmed: bool = Field(title="Confirm")


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@server.tool()
async def confirm(action: str, ctx: Context) -> str:
    """Asks the user to confirm, then runs. NOT idempotent."""
    answer = await ctx.elicit(message=f"Confirm {action}?", schema=Confirmation)
    confirmed = answer.action == "accept" and answer.data.confirmed is True
    print(json.dumps({"elicited": {"action": answer.action, "confirmed": confirmed}}), flush=True)
    return f"confirmed: {action}" if confirmed else "not confirmed"


def seen(scope: dict[str, Any], headers: dict[str, str], body: bytes, status: int) -> dict[str, Any]:
    """What the server prints of one HTTP request (see the top)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        parsed = {}
    response = "result" if "result" in parsed else "error" if "error" in parsed else None
    return {
        "httpMethod": scope["method"],
        "method": parsed.get("method"),
        "response": response,
        "status": status,
        "protocolVersion": headers.get("mcp-protocol-version"),
        "session": "mcp-session-id" in headers,
    }


async def main() -> None:
    await serve(recorded(server.streamable_http_app(), seen))


if __name__ == "__main__":
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        sys.exit(0)
