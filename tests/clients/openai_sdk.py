"""The real openai SDK against a ragd server: models, chat (plain and streamed), tools
with each tool_choice (auto, required, none, a named function), streamed tool-call
deltas, a tool-result round trip, json_schema output, the knowledge-base model answering
from an uploaded document with a citation (plain and streamed), embeddings (float and
base64), and errors. Prints `ok <check>` for each check; any failure raises (non-zero
exit)."""
import base64, json, struct, sys

import httpx
import openai

base, key = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=120)

ids = [m.id for m in client.models.list().data]
llm = next(i for i in ids if i.endswith(".gguf"))
assert "knowledge-base" in ids and "all-MiniLM-L6-v2" in ids, ids
print("ok models", ids)

r = client.chat.completions.create(model=llm, max_tokens=8, temperature=0,
    messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}])
c = r.choices[0]
assert c.message.role == "assistant" and c.message.content, r
assert c.finish_reason in ("stop", "length"), c.finish_reason
assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
print("ok chat", repr(c.message.content))

pieces, usage, finish = [], None, None
for chunk in client.chat.completions.create(model=llm, max_tokens=8, temperature=0, stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}]):
    if chunk.usage:
        usage = chunk.usage
    for ch in chunk.choices:
        if ch.delta.content:
            pieces.append(ch.delta.content)
        finish = ch.finish_reason or finish
streamed = "".join(pieces)
assert streamed == c.message.content, (streamed, c.message.content)
assert usage and usage.completion_tokens == r.usage.completion_tokens, usage
assert finish == c.finish_reason, finish
print("ok stream")

tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
r = client.chat.completions.create(model=llm, max_tokens=32, temperature=0, tools=tools,
    tool_choice={"type": "function", "function": {"name": "get_weather"}},
    messages=[{"role": "user", "content": "What is the weather in Paris?"}])
c = r.choices[0]
assert c.finish_reason == "tool_calls", c
call = c.message.tool_calls[0]
assert call.function.name == "get_weather" and call.id, call
args = json.loads(call.function.arguments)
assert isinstance(args.get("city"), str), args
print("ok tool call", args)

r = client.chat.completions.create(model=llm, max_tokens=32, temperature=0, tools=tools,
    tool_choice="required", messages=[{"role": "user", "content": "What is the weather in Paris?"}])
c = r.choices[0]
assert c.finish_reason == "tool_calls" and c.message.tool_calls[0].function.name == "get_weather", c
json.loads(c.message.tool_calls[0].function.arguments)
print("ok tool_choice required")

r = client.chat.completions.create(model=llm, max_tokens=16, temperature=0, tools=tools,
    tool_choice="none", messages=[{"role": "user", "content": "What is the weather in Paris?"}])
c = r.choices[0]
assert not c.message.tool_calls and c.message.content and c.finish_reason in ("stop", "length"), c
assert "<tool_call>" not in c.message.content, c.message.content
print("ok tool_choice none")

r = client.chat.completions.create(model=llm, max_tokens=32, temperature=0, tools=tools,
    tool_choice="auto", messages=[{"role": "user", "content": "What is the weather in Paris?"}])
c = r.choices[0]
if c.message.tool_calls:
    assert c.finish_reason == "tool_calls", c
    json.loads(c.message.tool_calls[0].function.arguments)
else:
    assert c.message.content and c.finish_reason in ("stop", "length"), c
print("ok tool_choice auto", "call" if c.message.tool_calls else "text")

deltas, finish = {}, None
for chunk in client.chat.completions.create(model=llm, max_tokens=32, temperature=0, tools=tools, stream=True,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        messages=[{"role": "user", "content": "What is the weather in Paris?"}]):
    for ch in chunk.choices:
        for tc in ch.delta.tool_calls or []:
            d = deltas.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            d["id"] += tc.id or ""
            d["name"] += (tc.function.name or "") if tc.function else ""
            d["arguments"] += (tc.function.arguments or "") if tc.function else ""
        finish = ch.finish_reason or finish
assert finish == "tool_calls" and list(deltas) == [0], (finish, deltas)
assert deltas[0]["id"] and deltas[0]["name"] == "get_weather", deltas
assert json.loads(deltas[0]["arguments"]) == args, (deltas, args)
print("ok streamed tool call", deltas[0]["arguments"])

r2 = client.chat.completions.create(model=llm, max_tokens=8, temperature=0, tools=tools, messages=[
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
    {"role": "tool", "tool_call_id": call.id, "content": "{\"weather\": \"sunny\"}"}])
assert r2.choices[0].message.content is not None or r2.choices[0].message.tool_calls
print("ok tool result round trip")

schema = {"type": "object", "properties": {"name": {"type": "string", "enum": ["Ann", "Bob"]},
          "age": {"type": "integer"}},
          "required": ["name", "age"]}
r = client.chat.completions.create(model=llm, max_tokens=96, temperature=0,
    response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema}},
    messages=[{"role": "user", "content": "Give a person's name and age."}])
assert r.choices[0].finish_reason == "stop", r
out = json.loads(r.choices[0].message.content)
assert isinstance(out["name"], str) and isinstance(out["age"], int), out
print("ok json_schema", out)

WORD = "quillfeather"
up = httpx.post(base + "/api/v1/upload", headers={"X-API-Key": key}, timeout=120, files={"file": ("valves.md",
    f"# Valve care\n\nThe {WORD} valve must be greased every spring before the pumps start.\n".encode())})
assert up.status_code == 200, up.text
q = f"When must the {WORD} valve be greased?"
raw = client.with_raw_response.chat.completions.create(model="knowledge-base", max_tokens=128, temperature=0,
    messages=[{"role": "user", "content": q}])
kb = raw.parse()
body = raw.http_response.json()
text = kb.choices[0].message.content
assert "[1]" in text and "Sources:" in text and "valves.md" in text and "spring" in text.lower(), text
assert body["sources"] and body["sources"][0]["source"] == "valves.md", body.get("sources")
print("ok knowledge-base", repr(text[:80]))

pieces, sources = [], None
for chunk in client.chat.completions.create(model="knowledge-base", max_tokens=128, temperature=0, stream=True,
        messages=[{"role": "user", "content": q}]):
    for ch in chunk.choices:
        pieces.append(ch.delta.content or "")
    sources = (chunk.model_extra or {}).get("sources") or sources
streamed = "".join(pieces)
assert "[1]" in streamed and "valves.md" in streamed, streamed
assert sources and sources[0]["source"] == "valves.md", sources
print("ok knowledge-base stream")

e = client.embeddings.create(model="all-MiniLM-L6-v2", input=["pumps and valves", "leave policy"])
v = e.data[0].embedding
assert len(e.data) == 2 and len(v) == 384, len(v)
raw = client.with_raw_response.embeddings.create(model="all-MiniLM-L6-v2", input="pumps and valves",
                                                encoding_format="base64").http_response.json()
b = base64.b64decode(raw["data"][0]["embedding"])
vb = struct.unpack("<%df" % (len(b) // 4), b)
assert len(vb) == 384 and max(abs(x - y) for x, y in zip(v, vb)) < 1e-6
print("ok embeddings")

try:
    client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    raise AssertionError("an unknown model was accepted")
except openai.NotFoundError as err:
    assert err.code == "model_not_found", err.body
print("ok unknown model")

bad = openai.OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0)
try:
    bad.models.list()
    raise AssertionError("a wrong key was accepted")
except openai.AuthenticationError:
    pass
print("ok wrong key")
