"""The real `mcp` SDK against ragd's MCP server (driven by tests/mcp_sdk.rs).

Each check prints a line `NAME value` that the Rust test reads; any failed expectation
raises, so the script exits non-zero with the reason.

Modes: `http URL TOKEN WORD DOC_ID SOURCE`, `elicit URL TOKEN ACCEPT_DOC_ID DECLINE_DOC_ID`
(held deletes confirmed or declined by the person through the client's elicitation form), (streamable HTTP, the SDK's default version
negotiation and the legacy handshake), `refused URL BAD_TOKEN`, and
`stdio RAGD ARGS_JSON ENV_JSON WORD` (the SDK starts `ragd mcp ...` itself; an empty WORD
searches an empty knowledge base).
"""

import asyncio
import json
import sys

from mcp import Client, MCPError, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def http_client(url: str, token: str, mode: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), mode=mode)


async def search(c: Client, word: str, label: str) -> None:
    r = await c.call_tool("search_knowledge_base", {"query": word, "top_k": 3})
    assert not r.is_error, r
    text = r.content[0].text
    assert word in text, f"{word!r} not in the search result: {text[:500]}"
    print(f"SEARCH_{label}", "found")


async def http_checks(url: str, token: str, word: str, doc_id: str, source: str) -> None:
    async with http_client(url, token, "auto") as c:
        print("VERSION_AUTO", c.protocol_version)
        info = c.server_info
        print("SERVER", info.name if info else None)
        tools = {t.name: t for t in (await c.list_tools()).tools}
        schema = tools["search_knowledge_base"].input_schema
        assert schema["type"] == "object" and "query" in schema["properties"], schema
        assert "query" in schema.get("required", []), schema
        print("TOOLS", len(tools))
        print("DELETE_DESTRUCTIVE", tools["delete_document"].annotations.destructive_hint)
        await search(c, word, "AUTO")

        held = await c.call_tool("delete_document", {"document_id": doc_id})
        assert not held.is_error, held
        assert "held" in held.content[0].text.lower(), held.content[0].text
        sc = held.structured_content
        assert sc["status"] == "pending_confirmation", sc
        print("HELD", sc["action_id"])

        bad = await c.call_tool("search_knowledge_base", {"query": "", "top_k": 3})
        print("INVALID_ARGS_IS_ERROR", bad.is_error, json.dumps(bad.content[0].text))

        try:
            await c.call_tool("no_such_tool", {})
            raise AssertionError("an unknown tool was accepted")
        except MCPError as e:
            print("UNKNOWN_TOOL", e.code)

        resources = (await c.list_resources()).resources
        print("RESOURCES", len(resources))
        mine = [r for r in resources if r.name == source]
        assert mine, [r.name for r in resources]
        assert str(mine[0].uri).startswith("ragd://sources/"), mine[0].uri
        read = await c.read_resource(mine[0].uri)
        text = read.contents[0].text
        assert word in text, text[:500]
        print("READ", mine[0].mime_type, len(text))

        try:
            await c.read_resource("ragd://sources/none-such")
            raise AssertionError("a missing resource was read")
        except MCPError as e:
            print("MISSING_RESOURCE", e.code)

    # The handshake revisions: initialize, a session id, DELETE at the end.
    async with http_client(url, token, "legacy") as c:
        print("VERSION_LEGACY", c.protocol_version)
        assert (await c.list_tools()).tools
        await c.send_ping()
        await search(c, word, "LEGACY")


async def elicit(url: str, token: str, accept_doc: str, decline_doc: str) -> None:
    asked = []

    def answering(confirm: bool):
        async def callback(context, params):
            asked.append(params.message)
            assert params.requested_schema["properties"]["confirm"]["type"] == "boolean"
            if confirm:
                return types.ElicitResult(action="accept", content={"confirm": True})
            return types.ElicitResult(action="decline")

        return callback

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    transport = streamable_http_client(url, http_client=http)
    async with Client(transport, elicitation_callback=answering(True)) as c:
        r = await c.call_tool("delete_document", {"document_id": accept_doc})
        assert not r.is_error, r
        assert r.structured_content["status"] == "executed", r.structured_content
        print("ELICIT_ACCEPTED", r.structured_content["action_id"])
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    transport = streamable_http_client(url, http_client=http)
    async with Client(transport, elicitation_callback=answering(False)) as c:
        r = await c.call_tool("delete_document", {"document_id": decline_doc})
        assert not r.is_error, r
        assert "declined" in r.content[0].text, r.content[0].text
        print("ELICIT_DECLINED", "ok")
    assert len(asked) == 2 and "delete_document" in asked[0], asked
    print("ELICIT_ASKED", len(asked))


async def refused(url: str, bad_token: str) -> None:
    try:
        async with http_client(url, bad_token, "auto") as c:
            await c.list_tools()
        raise AssertionError("a wrong token was let in")
    except AssertionError:
        raise
    except BaseException as e:  # the SDK raises its own error (or an ExceptionGroup)
        print("REFUSED", type(e).__name__, str(e)[:200].replace("\n", " "))


async def stdio_checks(ragd: str, args: list, env: dict, word: str) -> None:
    params = StdioServerParameters(command=ragd, args=args, env=env)
    async with Client(params) as c:
        print("STDIO_VERSION", c.protocol_version)
        tools = {t.name for t in (await c.list_tools()).tools}
        assert "search_knowledge_base" in tools, tools
        print("STDIO_TOOLS", len(tools))
        if word:
            await search(c, word, "STDIO")
        else:
            r = await c.call_tool("search_knowledge_base", {"query": "anything", "top_k": 2})
            assert not r.is_error, r
            print("STDIO_SEARCH_EMPTY", json.loads(r.content[0].text)["count"])


def main() -> None:
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "http":
        asyncio.run(http_checks(*rest))
    elif mode == "elicit":
        asyncio.run(elicit(*rest))
    elif mode == "refused":
        asyncio.run(refused(*rest))
    elif mode == "stdio":
        ragd, args, env, word = rest
        asyncio.run(stdio_checks(ragd, json.loads(args), json.loads(env), word))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
