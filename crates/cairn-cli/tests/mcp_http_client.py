"""Drives `cairn serve`'s /mcp endpoint with the official MCP Python SDK (PyPI `mcp`) over the
Streamable HTTP transport.

Run by tests/serve.rs with the endpoint URL, a write token and a read token as arguments. One
session with the write token stores and recalls a memory (the token's project, never named);
one with the read token may recall but not write; a request with a wrong token is refused
with 401 before any MCP message is read. Exits non-zero on the first failed check.
"""

import sys

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def check(condition, message):
    if not condition:
        print(f"FAILED: {message}", flush=True)
        sys.exit(1)


def text(result):
    return "".join(getattr(block, "text", "") for block in result.content)


async def session_with(url, token, work):
    headers = {"Authorization": f"Bearer {token}"}
    async with create_mcp_http_client(headers=headers) as client:
        async with streamable_http_client(url, http_client=client) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                await work(session)


async def main(url, writer, reader):
    async def as_writer(session):
        listed = await session.list_tools()
        names = {tool.name for tool in listed.tools}
        check("remember" in names and "recall" in names, f"tools: {sorted(names)}")
        stored = await session.call_tool(
            "remember",
            {"type": "decision", "title": "glaze kiln", "body": "We fire the glaze kiln at cone 6 with a slow cool."},
        )
        check(not stored.is_error, f"remember: {text(stored)}")
        check(stored.structured_content["status"] == "added", f"structured: {stored.structured_content}")
        found = await session.call_tool("recall", {"query": "glaze kiln cone"})
        check(not found.is_error, f"recall: {text(found)}")
        check("slow cool" in text(found), f"recall text: {text(found)}")
        shown = await session.call_tool("show", {"id": stored.structured_content["id"]})
        check(shown.structured_content["project"] == "alpha", f"project: {shown.structured_content}")
        updated = await session.call_tool("update", {"id": stored.structured_content["id"], "importance": 4})
        check(not updated.is_error, f"update: {text(updated)}")
        print("writer session ok", flush=True)

    async def as_reader(session):
        found = await session.call_tool("recall", {"query": "glaze kiln cone"})
        check(not found.is_error and "slow cool" in text(found), f"reader recall: {text(found)}")
        refused = await session.call_tool("remember", {"type": "note", "body": "a read token cannot write"})
        check(refused.is_error, f"a read token wrote: {text(refused)}")
        check("may only read" in text(refused), f"refusal: {text(refused)}")
        print("reader session ok", flush=True)

    await session_with(url, writer, as_writer)
    await session_with(url, reader, as_reader)

    async with httpx2.AsyncClient() as client:
        response = await client.post(
            url,
            headers={"Authorization": "Bearer cairn_" + "0" * 64, "Accept": "application/json, text/event-stream"},
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        )
        check(response.status_code == 401, f"wrong token: {response.status_code} {response.text}")
        check(response.headers["content-type"] == "application/problem+json", "a problem document")
    print("wrong token refused", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
