"""A small MCP client of the official Python SDK 1.x (mcp 1.30.0, which speaks the `initialize`
era only: 2025-11-25 and earlier), run by the proxy's tests.

    python client_v1.py [--token TOKEN] --url URL STEP...
    python client_v1.py STEP... -- COMMAND [ARG...]

Connects over Streamable HTTP to URL, or over stdio to COMMAND (run with this process's
environment), then runs the steps in order. Prints one JSON line per step on stdout, as
client.py does (the SDK's logs, and COMMAND's stderr, go to stderr):

  connect            (always first) {"step": "connect", "protocolVersion": ...,
                     "handshake": "initialize", "serverName": ...}
  list               {"step": "list", "tools": [names in the server's order]}
  call:TOOL[:JSON]   {"step": "call", "tool": ..., "isError": ..., "text": [text contents]}
  mrtr:TOOL[:JSON]   a call on which the server asks the user (an elicitation request): every
                     form is accepted, its yes/no fields answered yes; "elicitations" lists
                     what was asked ({"mode", "message"}), beside the call's final result

A step that fails prints {"step": ..., "error": {"type", "message", and for a JSON-RPC error
"code" and "data"}} and ends the run with exit status 1.
"""

from __future__ import annotations

import sys
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import httpx
import mcp.types as types
from harness import Elicitations, client_main, connected, failed, run_step
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.context import RequestContext
from mcp.shared.exceptions import McpError


def outcome(result: types.CallToolResult) -> tuple[bool, list[str]]:
    """A call's isError and its texts."""
    return result.isError, [block.text for block in result.content if isinstance(block, types.TextContent)]


class ElicitationCallback(Elicitations):
    """The SDK's elicitation callback, answering as `Elicitations` does."""

    async def __call__(
        self, context: RequestContext[ClientSession, Any], params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        schema = getattr(params, "requestedSchema", None) or {}
        return types.ElicitResult(action="accept", content=self.answer(params.mode, params.message, schema))


async def run(transport: AbstractAsyncContextManager[Any], steps: list[str]) -> int:
    elicitations = ElicitationCallback()
    step = "connect"
    try:
        async with transport as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write, elicitation_callback=elicitations) as session:
                initialized = await session.initialize()
                connected(initialized.protocolVersion, "initialize", initialized.serverInfo.name)
                for step in steps:
                    await run_step(session, elicitations, step, outcome)
    except Exception as error:  # noqa: BLE001 - reported, the test reads it
        return failed(step, error, McpError)
    return 0


def stdio(**parameters: Any) -> AbstractAsyncContextManager[Any]:
    return stdio_client(StdioServerParameters(**parameters))


async def main() -> int:
    def run_with(target: Any, args: Any) -> Any:
        return run(target, args.steps)

    return await client_main(False, httpx, stdio, streamable_http_client, run_with)


if __name__ == "__main__":
    sys.exit(anyio.run(main))
