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

import argparse
import json
import socket
import sys
from typing import Any

import anyio
import uvicorn
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


def recorded(app: Any) -> Any:
    """`app`, printing what each HTTP request asked for and the status it got."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        body: list[bytes] = []

        async def receive_recorded() -> dict[str, Any]:
            message = await receive()
            if message["type"] == "http.request":
                body.append(message.get("body", b""))
            return message

        async def send_recorded(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                try:
                    parsed = json.loads(b"".join(body))
                except ValueError:
                    parsed = None
                if not isinstance(parsed, dict):
                    parsed = {}
                response = "result" if "result" in parsed else "error" if "error" in parsed else None
                seen = {
                    "httpMethod": scope["method"],
                    "method": parsed.get("method"),
                    "response": response,
                    "status": message["status"],
                    "protocolVersion": headers.get("mcp-protocol-version"),
                    "session": "mcp-session-id" in headers,
                }
                print(json.dumps({"seen": seen}, sort_keys=True), flush=True)
            await send(message)

        await app(scope, receive_recorded, send_recorded)

    return wrapped


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    port = parser.parse_args().port
    app = server.streamable_http_app()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    http = uvicorn.Server(uvicorn.Config(recorded(app), log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: http.serve(sockets=[sock]))
        while not http.started:
            await anyio.sleep(0.01)
        print(json.dumps({"url": f"http://127.0.0.1:{port}/mcp"}), flush=True)


if __name__ == "__main__":
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        sys.exit(0)
