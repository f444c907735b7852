"""A small MCP client of the official Python SDK 1.x (mcp 1.30.0, which speaks the `initialize`
era only: 2025-11-25 and earlier), run by the proxy's tests.

    python client_v1.py STEP... -- COMMAND [ARG...]

Connects over stdio to COMMAND (run with this process's environment), then runs the steps in
order. Prints one JSON line per step on stdout, as client.py does (the SDK's logs, and
COMMAND's stderr, go to stderr):

  connect            (always first) {"step": "connect", "protocolVersion": ...,
                     "handshake": "initialize", "serverName": ...}
  list               {"step": "list", "tools": [names in the server's order]}
  call:TOOL[:JSON]   {"step": "call", "tool": ..., "isError": ..., "text": [text contents]}

A step that fails prints {"step": ..., "error": {"type", "message", and for a JSON-RPC error
"code" and "data"}} and ends the run with exit status 1.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import McpError


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line, sort_keys=True), flush=True)


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def error_of(error: BaseException) -> dict[str, Any]:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    described: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    if isinstance(error, McpError):
        described["code"] = error.error.code
        if error.error.data is not None:
            described["data"] = error.error.data
    return described


def parse_step(step: str) -> tuple[str, str | None, dict[str, Any]]:
    kind, _, rest = step.partition(":")
    tool, _, arguments = rest.partition(":")
    return kind, tool or None, json.loads(arguments) if arguments else {}


async def run_step(session: ClientSession, step: str) -> None:
    kind, tool, arguments = parse_step(step)
    if kind == "list":
        listed = await session.list_tools()
        emit({"step": "list", "tools": [t.name for t in listed.tools]})
    elif kind == "call":
        assert tool is not None, f"{step}: no tool named"
        result = await session.call_tool(tool, arguments)
        emit({"step": "call", "tool": tool, "isError": result.isError, "text": texts(result)})
    else:
        raise ValueError(f"unknown step {step!r}")


async def run(parameters: StdioServerParameters, steps: list[str]) -> int:
    step = "connect"
    try:
        async with stdio_client(parameters) as (read, write):
            async with ClientSession(read, write) as session:
                initialized = await session.initialize()
                emit(
                    {
                        "step": "connect",
                        "protocolVersion": initialized.protocolVersion,
                        "handshake": "initialize",
                        "serverName": initialized.serverInfo.name,
                    }
                )
                for step in steps:
                    await run_step(session, step)
    except Exception as error:  # noqa: BLE001 - reported, the test reads it
        emit({"step": step.partition(":")[0], "error": error_of(error)})
        return 1
    return 0


async def main() -> int:
    argv = sys.argv[1:]
    if "--" not in argv:
        print("usage: client_v1.py STEP... -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    at = argv.index("--")
    steps, command = argv[:at], argv[at + 1 :]
    parameters = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    return await run(parameters, steps)


if __name__ == "__main__":
    sys.exit(anyio.run(main))
