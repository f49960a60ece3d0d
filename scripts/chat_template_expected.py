#!/usr/bin/env python3
"""Renders llama.cpp's copies of real chat templates with Python's jinja2, in the
environment Hugging Face's apply_chat_template uses, for one conversation (system, user,
assistant tool call, tool result; tools offered; generation prompt), and writes the texts
to tests/data/chat_templates_expected.json for tests/chat_templates.rs to compare with.

Run once with the venv that has jinja2:
  ~/.cache/ragd-bench/venv/bin/python scripts/chat_template_expected.py
"""
import json
import os
import sys
from datetime import datetime

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

TEMPLATES = os.path.expanduser(
    "~/.cache/llama-bench/src/llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates"
)
# Template file stem -> (bos_token, eos_token).
FILES = {
    "Qwen-Qwen3-0.6B": ("", "<|im_end|>"),
    "Qwen-Qwen2.5-7B-Instruct": ("", "<|im_end|>"),
    "meta-llama-Llama-3.1-8B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.2-3B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "microsoft-Phi-3.5-mini-instruct": ("<s>", "<|endoftext|>"),
    "mistralai-Mistral-Nemo-Instruct-2407": ("<s>", "</s>"),
    "google-gemma-2-2b-it": ("<bos>", "<eos>"),
    "HuggingFaceTB-SmolLM3-3B": ("", "<|im_end|>"),
}
NOW = datetime(2026, 1, 2, 3, 4, 5)
TOOLS = [{
    "type": "function",
    "function": {
        "name": "search_documents",
        "description": "Search the knowledge base.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to look for"}},
            "required": ["query"],
        },
    },
}]
CALL = {"id": "call00001", "type": "function",
        "function": {"name": "search_documents",
                     "arguments": {"query": "manual \"contents\"", "top_k": 3}}}
CHATS = {
    "tools": [
        {"role": "system", "content": "You are ragd. Answer briefly."},
        {"role": "user", "content": "What is in <|im_start|>the manual?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "content": "{\"hits\": 2}", "tool_call_id": "call00001",
         "name": "search_documents"},
    ],
    "plain": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello, how can I help?"},
        {"role": "user", "content": "What is in the manual?"},
    ],
}


def env():
    e = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                      extensions=[loopcontrols])

    def raise_exception(message):
        raise ValueError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    e.filters["tojson"] = tojson
    e.globals["raise_exception"] = raise_exception
    e.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return e


def main():
    if not os.path.isdir(TEMPLATES):
        sys.exit(f"no templates at {TEMPLATES}")
    out = {}
    for stem, (bos, eos) in FILES.items():
        with open(os.path.join(TEMPLATES, stem + ".jinja"), encoding="utf-8") as f:
            template = env().from_string(f.read())
        for chat, messages in CHATS.items():
            tools = TOOLS if chat == "tools" else None
            kwargs = dict(messages=messages, add_generation_prompt=True,
                          bos_token=bos, eos_token=eos)
            if tools:
                kwargs["tools"] = tools
            try:
                out[f"{stem}/{chat}"] = {"text": template.render(**kwargs)}
            except ValueError as e:
                out[f"{stem}/{chat}"] = {"error": str(e)}
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "data",
                        "chat_templates_expected.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
