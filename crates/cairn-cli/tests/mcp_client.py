"""Drives `cairn mcp` with the official MCP Python SDK (PyPI `mcp`) over stdio.

Run by tests/mcp.rs with the binary path as the first argument; the brain comes from CAIRN_DB.
Two sessions: the legacy handshake (`initialize`, what deployed clients speak) and the
stateless 2026-07-28 revision (`server/discover`). With `graph` as the second argument, one
session drives the knowledge-graph tools instead (relate, neighbors, entities, graph) against
an empty brain. With `parity`, one session drives the tools that answer what the CLI's
unrelate, edges, clusters, entity add, awareness drop, inbox accept/dismiss and dream
list/show/accept/reject do, on a brain tests/mcp.rs prepared (two inbox items, one proposal
set). Exits non-zero on the first failed check.
"""

import json
import os
import subprocess
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


def cli(binary, *args):
    """Runs the CLI on the same brain, for what the test needs between two tool calls."""
    done = subprocess.run([binary, "--json", *args], env=dict(os.environ), capture_output=True, text=True)
    check(done.returncode == 0, f"cairn {' '.join(args)}: {done.stdout} {done.stderr}")
    return json.loads(done.stdout)


async def parity(binary):
    params = StdioServerParameters(command=binary, args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            reads = ["edges", "clusters", "entity_search", "dream_list", "dream_show"]
            writes = ["unrelate", "entity_add", "awareness_drop", "inbox_accept", "inbox_dismiss", "dream_accept", "dream_reject"]
            for name in reads + writes:
                check(name in tools, f"{name} missing from {sorted(tools)}")
                check(tools[name].annotations.open_world_hint is False, f"{name}: closed world")
                check(tools[name].annotations.read_only_hint is (name in reads), f"{name}: read-only hint")
            for name in ["unrelate", "awareness_drop", "inbox_dismiss", "dream_accept", "dream_reject"]:
                check(tools[name].annotations.destructive_hint is True, f"{name} changes what exists")
            check(tools["entity_add"].annotations.destructive_hint is False, "entity_add destroys nothing")

            # entity add and search
            added = await session.call_tool("entity_add", {"name": "billing service", "type": "service", "aliases": ["billing-svc"]})
            check(not added.is_error, f"entity_add: {text(added)}")
            check(added.structured_content["name"] == "billing service", f"entity_add: {added.structured_content}")
            check("<stored-data" in text(added), f"the entity name is fenced: {text(added)}")
            found = await session.call_tool("entity_search", {"query": "BILLING"})
            names = [e["name"] for e in found.structured_content["entities"]]
            check("billing service" in names, f"entity_search: {found.structured_content}")
            by_alias = await session.call_tool("entity_search", {"query": "svc"})
            check([e["name"] for e in by_alias.structured_content["entities"]] == ["billing service"], f"by alias: {by_alias.structured_content}")
            nothing = await session.call_tool("entity_search", {"query": "  "})
            check(error_text(nothing) and "no letters or digits" in text(nothing), f"blank query: {text(nothing)}")

            # relate, edges (now and with history), unrelate
            related = await session.call_tool("relate", {"src": "billing service", "relation": "requires", "dst": "postgres-main"})
            check(related.is_error, "an unknown end is refused (postgres-main does not exist yet)")
            await session.call_tool("entity_add", {"name": "postgres-main", "type": "service"})
            related = await session.call_tool("relate", {"src": "billing service", "relation": "requires", "dst": "postgres-main"})
            check(related.structured_content["status"] == "asserted", f"relate: {related.structured_content}")
            edges = await session.call_tool("edges", {"node": "billing-svc"})
            check(not edges.is_error, f"edges: {text(edges)}")
            check([e["relation"] for e in edges.structured_content["edges"]] == ["requires"], f"edges: {edges.structured_content}")
            check("<stored-data" in text(edges) and "requires postgres-main" in text(edges), f"edges text: {text(edges)}")
            ended = await session.call_tool("unrelate", {"src": "billing service", "relation": "requires", "dst": "postgres-main"})
            check(not ended.is_error and ended.structured_content["status"] == "invalidated", f"unrelate: {ended.structured_content}")
            again = await session.call_tool("unrelate", {"src": "billing service", "relation": "requires", "dst": "postgres-main"})
            check(again.structured_content["status"] == "nothing_open", f"unrelate again: {again.structured_content}")
            now = await session.call_tool("edges", {"node": "billing service"})
            check(now.structured_content["edges"] == [], f"closed edge no longer valid: {now.structured_content}")
            history = await session.call_tool("edges", {"node": "billing service", "history": True})
            ops = [entry["op"] for entry in history.structured_content["history"]]
            check(ops == ["assert", "invalidate"], f"edge history: {history.structured_content}")

            # clusters: the same answer as the CLI
            clusters = await session.call_tool("clusters", {"min_size": 2})
            check(not clusters.is_error, f"clusters: {text(clusters)}")
            expected = cli(binary, "clusters", "--min-size", "2")
            check(clusters.structured_content["found"] == expected["found"], f"clusters: {clusters.structured_content} vs {expected}")
            check(clusters.structured_content["clusters"] == expected["clusters"], f"clusters: {clusters.structured_content} vs {expected}")

            # awareness drop
            item = await session.call_tool("awareness_add", {"text": "Release freeze this week"})
            item_id = item.structured_content["item"]["id"]
            dropped = await session.call_tool("awareness_drop", {"id": item_id})
            check(dropped.structured_content == {"dropped": True, "id": item_id}, f"awareness_drop: {dropped.structured_content}")
            gone = await session.call_tool("awareness", {})
            check(gone.structured_content["awareness"] == [], f"dropped: {gone.structured_content}")
            twice = await session.call_tool("awareness_drop", {"id": item_id})
            check(twice.structured_content["dropped"] is False, f"drop twice: {twice.structured_content}")

            # inbox accept and dismiss
            inbox = (await session.call_tool("inbox", {})).structured_content["inbox"]
            check(len(inbox) >= 2, f"the prepared inbox: {inbox}")
            accepted = await session.call_tool("inbox_accept", {"id": inbox[0]["id"], "type": "fact"})
            check(not accepted.is_error, f"inbox_accept: {text(accepted)}")
            check(accepted.structured_content["status"] == "added", f"inbox_accept: {accepted.structured_content}")
            stored = cli(binary, "show", str(accepted.structured_content["id"]))
            check(stored["type"] == "fact" and stored["body"] == inbox[0]["body"], f"accepted record: {stored}")
            dismissed = await session.call_tool("inbox_dismiss", {"id": inbox[1]["id"]})
            check(not dismissed.is_error and dismissed.structured_content["item"]["resolution"] == "dismissed", f"inbox_dismiss: {dismissed.structured_content}")
            left = (await session.call_tool("inbox", {})).structured_content["inbox"]
            check(all(i["id"] not in (inbox[0]["id"], inbox[1]["id"]) for i in left), f"resolved items left the inbox: {left}")
            missing = await session.call_tool("inbox_dismiss", {"id": 9999})
            check(missing.is_error, f"an unknown inbox item: {text(missing)}")

            # dreams: list, show, reject; a new set, accept
            listed = await session.call_tool("dream_list", {})
            sets = listed.structured_content["dreams"]
            check(len(sets) == 1 and sets[0]["status"] == "proposed", f"dream_list: {sets}")
            first = sets[0]["id"]
            shown = await session.call_tool("dream_show", {"id": first})
            check(not shown.is_error, f"dream_show: {text(shown)}")
            check(any(p["kind"] == "merge" for p in shown.structured_content["proposals"]), f"dream_show: {shown.structured_content}")
            check("<stored-data" in text(shown), f"proposal labels are fenced: {text(shown)}")
            check(shown.structured_content == cli(binary, "dream", "show", first), "dream_show answers what the CLI answers")
            rejected = await session.call_tool("dream_reject", {"id": first})
            check(not rejected.is_error and rejected.structured_content == {"status": "rejected", "id": first}, f"dream_reject: {rejected.structured_content}")
            refused = await session.call_tool("dream_accept", {"id": first})
            check(error_text(refused) and "rejected" in text(refused), f"a rejected set cannot be accepted: {text(refused)}")
            cli(binary, "remember", "--type", "note", "--allow-duplicate", "--at", "1d", "--body",
                os.environ["CAIRN_TEST_DEPLOY"] + " again")
            second = cli(binary, "dream")["dream"]["id"]
            check(second != first, "a new proposal set")
            applied = await session.call_tool("dream_accept", {"id": second, "only": ["merge"]})
            check(not applied.is_error, f"dream_accept: {text(applied)}")
            check(len(applied.structured_content["applied"]) >= 1, f"dream_accept: {applied.structured_content}")
            statuses = {d["id"]: d["status"] for d in (await session.call_tool("dream_list", {"limit": 0})).structured_content["dreams"]}
            check(statuses[first] == "rejected" and statuses[second] in ("accepted", "partial"), f"statuses: {statuses}")
            unknown = await session.call_tool("dream_show", {"id": "nope"})
            check(error_text(unknown) and "no dream" in text(unknown), f"unknown set: {text(unknown)}")
            print("parity tools ok", flush=True)


async def main(binary, mode):
    if mode == "graph":
        await graph(binary)
        return
    if mode == "parity":
        await parity(binary)
        return
    await legacy(binary)
    await modern(binary)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
