"""A Streamable HTTP MCP server of the official Python SDK (mcp 2.3.0) speaking 2026-07-28.

Stateless, JSON answers, on 127.0.0.1. Prints one JSON line, {"url": "http://127.0.0.1:PORT/mcp"},
once it accepts connections, then serves until killed, printing one more line for each HTTP
request as its answer starts: {"seen": {"httpMethod", "method" (JSON-RPC), "status", and the
headers "protocolVersion", "mcpMethod", "mcpName", "paramCity", "sessionId" (null when absent)}}.

    python server.py [--port PORT]      # 0 (the default): a free port

Tools:
  add(a, b)        the sum
  weather(city)    "Sunny in CITY"; `city` is annotated x-mcp-header: City, so a 2026-07-28
                   client must send it as Mcp-Param-City (the SDK checks it against the body)
  confirm(action)  a multi round-trip request: answers an InputRequiredResult with one
                   elicitation/create form ("confirm"), runs once the call comes back with the
                   user's acceptance ("confirmed: ACTION"), runs nothing otherwise
  notify()         publishes notifications/tools/list_changed to every subscriptions/listen
                   stream open here
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import anyio
from harness import recorded, serve
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
)
from pydantic import Field

server = MCPServer("python-sdk-test-server", version="2.3.0")


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@server.tool()
def weather(city: Annotated[str, Field(json_schema_extra={"x-mcp-header": "City"})]) -> str:
    """Answers the weather in a city."""
    return f"Sunny in {city}"


@server.tool()
def confirm(action: str, ctx: Context) -> str | InputRequiredResult:
    """Asks the user to confirm, then runs. NOT idempotent."""
    responses = ctx.input_responses
    if not responses or "confirm" not in responses:
        return InputRequiredResult(
            input_requests={
                "confirm": ElicitRequest(
                    params=ElicitRequestFormParams(
                        message=f"Confirm {action}?",
                        requested_schema={
                            "type": "object",
                            "properties": {"confirmed": {"type": "boolean", "title": "Confirm"}},
                            "required": ["confirmed"],
                        },
                    )
                )
            },
            # Sealed by the SDK's request-state boundary, verified when it comes back.
            request_state=json.dumps({"action": action}),
        )
    answer = responses["confirm"]
    if (
        isinstance(answer, ElicitResult)
        and answer.action == "accept"
        and (answer.content or {}).get("confirmed") is True
        and ctx.request_state is not None
        and json.loads(ctx.request_state) == {"action": action}
    ):
        return f"confirmed: {action}"
    return "not confirmed: nothing ran"


@server.tool()
async def notify(ctx: Context) -> str:
    """Tells every subscriptions/listen stream that the tool list changed."""
    await ctx.notify_tools_changed()
    return "notified"


def seen(scope: dict[str, Any], headers: dict[str, str], body: bytes, status: int) -> dict[str, Any]:
    """What the server prints of one HTTP request (see the top)."""
    try:
        method = json.loads(body).get("method")
    except (ValueError, AttributeError):
        method = None
    return {
        "httpMethod": scope["method"],
        "method": method,
        "status": status,
        "protocolVersion": headers.get("mcp-protocol-version"),
        "mcpMethod": headers.get("mcp-method"),
        "mcpName": headers.get("mcp-name"),
        "paramCity": headers.get("mcp-param-city"),
        "sessionId": headers.get("mcp-session-id"),
    }


async def main() -> None:
    app = server.streamable_http_app(stateless_http=True, json_response=True, host="127.0.0.1")
    await serve(recorded(app, seen))


if __name__ == "__main__":
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        sys.exit(0)
