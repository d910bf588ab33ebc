"""Drives `cairn mcp` with the official MCP Python SDK (PyPI `mcp`) over stdio.

Run by tests/mcp.rs with the binary path as the first argument; the brain comes from CAIRN_DB.
Two sessions: the legacy handshake (`initialize`, what deployed clients speak) and the
stateless 2026-07-28 revision (`server/discover`). With `graph` as the second argument, one
session drives the knowledge-graph tools instead (relate, neighbors, entities, graph) against
an empty brain. Exits non-zero on the first failed check.
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


def error_text(result):
    return result.is_error and text(result)


async def graph(binary):
    params = StdioServerParameters(command=binary, args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            for name in ["relate", "neighbors", "entities", "graph"]:
                check(name in tools, f"{name} missing from {sorted(tools)}")
                check(tools[name].description and len(tools[name].description) > 60, f"{name} has a description")
                check(tools[name].annotations.open_world_hint is False, f"{name}: closed world")
            check(tools["relate"].annotations.read_only_hint is False, "relate writes")
            check(tools["relate"].annotations.destructive_hint is False, "relate destroys nothing")
            check(tools["relate"].annotations.idempotent_hint is True, "relate twice changes nothing more")
            for name in ["neighbors", "entities", "graph"]:
                check(tools[name].annotations.read_only_hint is True, f"{name} is read-only")
            check(sorted(tools["relate"].input_schema["required"]) == ["dst", "relation", "src"], f"relate schema: {tools['relate'].input_schema}")
            check(tools["neighbors"].input_schema["required"] == ["node"], f"neighbors schema: {tools['neighbors'].input_schema}")

            stored = await session.call_tool(
                "remember",
                {"type": "infra", "title": "sessions", "body": "The `api` service keeps sessions in `postgres`; the handler is src/session.rs."},
            )
            check(not stored.is_error, f"remember: {text(stored)}")

            # entities: extracted on write, most mentioned first, filtered by type
            listed = await session.call_tool("entities", {})
            check(not listed.is_error, f"entities: {text(listed)}")
            names = [e["name"] for e in listed.structured_content["entities"]]
            check({"api", "postgres", "src/session.rs"} <= set(names), f"entities: {names}")
            check("<stored-data" in text(listed), f"entity names are fenced as data: {text(listed)}")
            paths = await session.call_tool("entities", {"type": "path", "limit": 5})
            check([e["name"] for e in paths.structured_content["entities"]] == ["src/session.rs"], f"paths: {paths.structured_content}")
            wrong = await session.call_tool("entities", {"limit": -1})
            check(error_text(wrong) and "invalid arguments for `entities`" in text(wrong), f"negative limit: {text(wrong)}")

            # relate: asserted, then idempotent; unknown ends and types refused like the CLI
            related = await session.call_tool("relate", {"src": "api", "relation": "requires", "dst": "postgres"})
            check(not related.is_error, f"relate: {text(related)}")
            check(related.structured_content["status"] == "asserted", f"relate: {related.structured_content}")
            check(related.structured_content["edge"]["relation"] == "requires", f"relate: {related.structured_content}")
            again = await session.call_tool("relate", {"src": "api", "relation": "requires", "dst": "postgres"})
            check(again.structured_content["status"] == "already_asserted", f"relate again: {again.structured_content}")
            dangling = await session.call_tool("relate", {"src": "api", "relation": "requires", "dst": "redis"})
            check(error_text(dangling) and 'nothing in this brain is called "redis"' in text(dangling), f"unknown end: {text(dangling)}")
            check(dangling.structured_content["status"] == "refused", f"unknown end: {dangling.structured_content}")
            check("--allow-dangling" in dangling.structured_content["ways_out"], f"ways out: {dangling.structured_content}")
            kept = await session.call_tool("relate", {"src": "api", "relation": "requires", "dst": "redis", "allow_dangling": True})
            check(kept.structured_content["status"] == "quarantined", f"allow_dangling: {kept.structured_content}")
            unknown_type = await session.call_tool("relate", {"src": "api", "relation": "owns", "dst": "postgres"})
            check(error_text(unknown_type) and "unknown relation type" in text(unknown_type), f"unknown type: {text(unknown_type)}")
            missing = await session.call_tool("relate", {"src": "api", "dst": "postgres"})
            check(error_text(missing) and "missing field `relation`" in text(missing), f"missing relation: {text(missing)}")
            bad_confidence = await session.call_tool("relate", {"src": "api", "relation": "relates", "dst": "postgres", "confidence": 7})
            check(error_text(bad_confidence) and "out of range" in text(bad_confidence), f"confidence: {text(bad_confidence)}")

            # neighbors: the blast radius
            radius = await session.call_tool("neighbors", {"node": "postgres", "direction": "in"})
            check(not radius.is_error, f"neighbors: {text(radius)}")
            answer = radius.structured_content
            check(answer["origin"]["name"] == "postgres" and answer["direction"] == "in", f"neighbors: {answer}")
            first = answer["neighbors"][0]
            check(first["node"]["name"] == "api" and first["relation"] == "requires" and first["score"] == 1.0, f"neighbors: {answer}")
            check(any(n["node"]["kind"] == "record" for n in answer["neighbors"]), f"the record that mentions it: {answer}")
            check("<stored-data" in text(radius) and "api requires postgres" in text(radius), f"neighbors text: {text(radius)}")
            out = await session.call_tool("neighbors", {"node": "api", "direction": "out", "depth": 1, "limit": 1})
            check(len(out.structured_content["neighbors"]) == 1, f"limit: {out.structured_content}")
            sideways = await session.call_tool("neighbors", {"node": "postgres", "direction": "sideways"})
            check(error_text(sideways) and "unknown variant `sideways`" in text(sideways), f"direction: {text(sideways)}")
            nobody = await session.call_tool("neighbors", {"node": "nobody"})
            check(error_text(nobody) and 'nothing in this brain is called "nobody"' in text(nobody), f"unknown node: {text(nobody)}")
            past = await session.call_tool("neighbors", {"node": "postgres", "as_of": "2001-01-01"})
            check(past.structured_content["neighbors"] == [] and "nothing was valid" in past.structured_content["note"], f"as_of: {past.structured_content}")

            # graph: counts per relation, listed edges, any past state
            whole = await session.call_tool("graph", {})
            check(not whole.is_error, f"graph: {text(whole)}")
            counts = {c["relation"]: c["edges"] for c in whole.structured_content["by_relation"]}
            check(counts.get("requires") == 1 and counts.get("mentions") == 3, f"graph: {whole.structured_content}")
            only = await session.call_tool("graph", {"relation": "requires", "limit": 0})
            check([e["dst"]["name"] for e in only.structured_content["listed"]] == ["postgres"], f"graph requires: {only.structured_content}")
            then = await session.call_tool("graph", {"as_of": "2001-01-01"})
            check(then.structured_content["edges"] == 0, f"graph then: {then.structured_content}")
            bad_time = await session.call_tool("graph", {"as_of": "not a time"})
            check(bad_time.is_error, f"bad as_of: {text(bad_time)}")
            typo = await session.call_tool("graph", {"asof": "2001-01-01"})
            check(error_text(typo) and "unknown field `asof`" in text(typo), f"typo: {text(typo)}")
            print("graph tools ok", flush=True)


async def main(binary, mode):
    if mode == "graph":
        await graph(binary)
        return
    await legacy(binary)
    await modern(binary)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
