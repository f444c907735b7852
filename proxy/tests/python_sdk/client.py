"""A small MCP client of the official Python SDK (mcp 2.3.0), run by the proxy's tests.

    python client.py [--mode auto|2026-07-28|legacy] [--token TOKEN] --url URL STEP...
    python client.py [--mode auto|2026-07-28|legacy] STEP... -- COMMAND [ARG...]

Connects over Streamable HTTP to URL, or over stdio to COMMAND (run with this process's
environment), then runs the steps in order. Prints one JSON line per step on stdout (the
SDK's logs, and COMMAND's stderr, go to stderr):

  connect            (always first) {"step": "connect", "protocolVersion": ..., "handshake":
                     "discover" | "initialize" | "adopted", "serverName": ...}
  list               {"step": "list", "tools": [names in the server's order]}
  call:TOOL[:JSON]   {"step": "call", "tool": ..., "isError": ..., "text": [text contents]}
  mrtr:TOOL[:JSON]   a call on which the server asks the user (an InputRequiredResult, or an
                     elicitation request): every form is accepted, its yes/no fields answered
                     yes; "elicitations" lists what was asked ({"mode", "message"}), beside
                     the call's final result
  listen[:TOOL]      opens subscriptions/listen (tools list changes), prints
                     {"step": "listen", "honored": {...}} once acknowledged, calls TOOL if
                     named (something that makes the server notify), then waits up to 15 s
                     for one event: {"step": "event", "event": "ToolsListChanged"}

A step that fails prints {"step": ..., "error": {"type", "message", and for a JSON-RPC error
"code" and "data"}} and ends the run with exit status 1.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import httpx2
import mcp_types as types
from harness import Elicitations, client_main, connected, emit, failed, run_step
from mcp.client import Client, ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

EVENT_TIMEOUT = 15.0


def outcome(result: types.CallToolResult) -> tuple[bool, list[str]]:
    """A call's isError and its texts."""
    return result.is_error, [block.text for block in result.content if isinstance(block, types.TextContent)]


class ElicitationCallback(Elicitations):
    """The SDK's elicitation callback, answering as `Elicitations` does."""

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        schema = getattr(params, "requested_schema", None) or {}
        if not isinstance(schema, dict):
            schema = schema.model_dump(by_alias=True)
        return types.ElicitResult(action="accept", content=self.answer(params.mode, params.message, schema))


async def listen(client: Client, tool: str | None, arguments: dict[str, Any]) -> None:
    """The `listen` step (see the top)."""
    async with client.listen(tools_list_changed=True) as subscription:
        emit({"step": "listen", "honored": subscription.honored.model_dump(by_alias=True, exclude_none=True)})
        if tool is not None:
            await client.call_tool(tool, arguments)
        with anyio.fail_after(EVENT_TIMEOUT):
            event = await subscription.__anext__()
        emit({"step": "event", "event": type(event).__name__})


async def run(target: Any, mode: str, steps: list[str]) -> int:
    elicitations = ElicitationCallback()
    step = "connect"
    try:
        async with Client(target, mode=mode, elicitation_callback=elicitations) as client:
            session = client.session
            handshake = (
                "initialize"
                if session.initialize_result is not None
                else "adopted"
                if mode not in ("auto", "legacy")
                else "discover"
            )
            server = client.server_info
            connected(client.protocol_version, handshake, server.name if server is not None else None)
            for step in steps:
                await run_step(client, elicitations, step, outcome, listen)
    except Exception as error:  # noqa: BLE001 - reported, the test reads it
        return failed(step, error, MCPError)
    return 0


async def main() -> int:
    def run_with(target: Any, args: Any) -> Any:
        return run(target, args.mode, args.steps)

    return await client_main(True, httpx2, StdioServerParameters, streamable_http_client, run_with)


if __name__ == "__main__":
    sys.exit(anyio.run(main))
