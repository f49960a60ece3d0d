"""The real anthropic SDK against a ragd server: a message (plain and streamed, with the
event sequence checked), stop sequences, tool use with a tool_result round trip (plain
and streamed), count_tokens, and errors. Prints `ok <check>` for each check; any failure
raises (non-zero exit)."""
import json, sys

import anthropic

base, key, llm = sys.argv[1], sys.argv[2], sys.argv[3]
client = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0, timeout=120)
HELLO = dict(model=llm, max_tokens=12, temperature=0, system="Be brief.",
             messages=[{"role": "user", "content": "Say hello."}])

m = client.messages.create(**HELLO)
assert m.type == "message" and m.role == "assistant" and m.model == llm, m
assert m.content and m.content[0].type == "text" and m.content[0].text, m.content
assert m.stop_reason in ("end_turn", "max_tokens"), m.stop_reason
assert m.usage.input_tokens > 0 and m.usage.output_tokens > 0, m.usage
text, hello_tokens = m.content[0].text, m.usage.input_tokens
print("ok message", repr(text))

kinds = [e.type for e in client.messages.create(stream=True, **HELLO)]
assert kinds[0] == "message_start" and kinds[-1] == "message_stop", kinds
assert kinds[-2] == "message_delta" and "content_block_start" in kinds, kinds
assert kinds.index("content_block_start") < kinds.index("content_block_delta") < kinds.index("content_block_stop"), kinds
with client.messages.stream(**HELLO) as s:
    streamed = "".join(s.text_stream)
    final = s.get_final_message()
assert streamed.strip() == text, (streamed, text)
assert final.stop_reason == m.stop_reason and final.usage.output_tokens == m.usage.output_tokens, final
assert final.usage.input_tokens == m.usage.input_tokens, final.usage
print("ok stream", kinds[:3])

long = client.messages.create(**{**HELLO, "max_tokens": 40,
    "messages": [{"role": "user", "content": "Write two sentences about the sea."}]})
words = long.content[0].text.split()
assert len(words) > 4, long.content
stop = " " + words[3]
cut = client.messages.create(**{**HELLO, "max_tokens": 40, "stop_sequences": ["@@never@@", stop],
    "messages": [{"role": "user", "content": "Write two sentences about the sea."}]})
assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == stop, (cut.stop_reason, cut.stop_sequence)
assert stop not in cut.content[0].text and long.content[0].text.startswith(cut.content[0].text), cut.content
print("ok stop_sequences", repr(stop))

tools = [{"name": "get_weather", "description": "The weather in a city.",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
ask = [{"role": "user", "content": "What is the weather in Paris?"}]
m = client.messages.create(model=llm, max_tokens=48, temperature=0, tools=tools,
                           tool_choice={"type": "tool", "name": "get_weather"}, messages=ask)
assert m.stop_reason == "tool_use", m
use = next(b for b in m.content if b.type == "tool_use")
assert use.name == "get_weather" and use.id.startswith("toolu_") and isinstance(use.input.get("city"), str), use
print("ok tool use", use.input)

with client.messages.stream(model=llm, max_tokens=48, temperature=0, tools=tools,
                            tool_choice={"type": "any"}, messages=ask) as s:
    final = s.get_final_message()
suse = next(b for b in final.content if b.type == "tool_use")
assert final.stop_reason == "tool_use" and suse.name == "get_weather" and isinstance(suse.input, dict), final
print("ok streamed tool use", suse.input)

m2 = client.messages.create(model=llm, max_tokens=16, temperature=0, tools=tools, messages=ask + [
    {"role": "assistant", "content": [{"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny, 21 C"}]}])
assert m2.content and m2.stop_reason in ("end_turn", "max_tokens", "tool_use"), m2
print("ok tool result round trip")

n = client.messages.count_tokens(model=llm, system="Be brief.", messages=[{"role": "user", "content": "Say hello."}])
assert n.input_tokens == hello_tokens, (n.input_tokens, hello_tokens)
nt = client.messages.count_tokens(model=llm, tools=tools, messages=ask)
assert nt.input_tokens > client.messages.count_tokens(model=llm, messages=ask).input_tokens, nt
print("ok count_tokens", n.input_tokens)

try:
    client.messages.create(**{**HELLO, "model": "no-such-model"})
    raise AssertionError("an unknown model was accepted")
except anthropic.NotFoundError as err:
    assert err.body["error"]["type"] == "not_found_error", err.body
print("ok unknown model")

try:
    client.messages.create(**{**HELLO, "temperature": 1.5})
    raise AssertionError("temperature 1.5 was accepted")
except anthropic.BadRequestError as err:
    assert err.body["error"]["type"] == "invalid_request_error" and "temperature" in err.body["error"]["message"], err.body
print("ok bad request")

bad = anthropic.Anthropic(base_url=base, api_key="wrong", max_retries=0)
try:
    bad.messages.create(**HELLO)
    raise AssertionError("a wrong key was accepted")
except anthropic.AuthenticationError as err:
    assert err.body["error"]["type"] == "authentication_error", err.body
print("ok wrong key")
