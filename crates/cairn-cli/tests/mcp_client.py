"""Drives `cairn mcp` with the official MCP Python SDK (PyPI `mcp`) over stdio.

Run by tests/mcp.rs with the binary path as the only argument; the brain comes from CAIRN_DB.
Two sessions: the legacy handshake (`initialize`, what deployed clients speak) and the
stateless 2026-07-28 revision (`server/discover`). Exits non-zero on the first failed check.
"""

import os
import sys

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def check(condition, message):
    if not condition:
        print(f"FAILED: {message}", flush=True)
        sys.exit(1)


def text(result):
    return "".join(getattr(block, "text", "") for block in result.content)


async def legacy(binary):
    params = StdioServerParameters(command=binary, args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "cairn", f"server name: {init.server_info}")
            listed = await session.list_tools()
            tools = {tool.name: tool for tool in listed.tools}
            check("recall" in tools and "remember" in tools, f"tools: {sorted(tools)}")
            check(tools["recall"].annotations.read_only_hint is True, "recall is read-only")
            check(tools["forget"].annotations.destructive_hint is True, "forget is destructive")
            check(tools["remember"].annotations.open_world_hint is False, "a memory tool's world is closed")

            stored = await session.call_tool(
                "remember",
                {"type": "decision", "title": "queue backend", "body": "We use Postgres SKIP LOCKED for the job queue instead of Redis."},
            )
            check(not stored.is_error, f"remember: {text(stored)}")
            check(stored.structured_content["status"] == "added", f"structured: {stored.structured_content}")

            found = await session.call_tool("recall", {"query": "job queue backend"})
            check(not found.is_error, f"recall: {text(found)}")
            check("SKIP LOCKED" in text(found), f"recall text: {text(found)}")
            check("<stored-data" in text(found), "recall text is fenced as stored data")
            check(found.structured_content["results"][0]["trust"] == "stated", "trust is labeled")

            brief = await session.call_tool("brief", {})
            check("Prefer small commits" in text(brief), f"brief: {text(brief)}")

            wrong = await session.call_tool("recall", {"limit": 3})
            check(wrong.is_error, "missing query is a tool error")
            print(f"legacy handshake ok ({init.protocol_version})", flush=True)


async def modern(binary):
    params = StdioServerParameters(command=binary, args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            discovered = await session.discover()
            check("2026-07-28" in discovered.supported_versions, f"versions: {discovered.supported_versions}")
            listed = await session.list_tools()
            check(any(tool.name == "recall" for tool in listed.tools), "tools over the stateless revision")
            found = await session.call_tool("recall", {"query": "Postgres job queue"})
            check(not found.is_error and "SKIP LOCKED" in text(found), f"recall (2026-07-28): {text(found)}")
            print("discover ok (2026-07-28)", flush=True)


async def main(binary):
    await legacy(binary)
    await modern(binary)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
