"""Reads ragd's /metrics with prometheus_client's own text parser (the reference Python
implementation) and prints one JSON line per sample: SAMPLE {"name", "labels", "value",
"type"}. Usage: prometheus_scrape.py URL [X-API-Key]."""

import json
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

url = sys.argv[1]
req = urllib.request.Request(url)
if len(sys.argv) > 2:
    req.add_header("X-API-Key", sys.argv[2])
with urllib.request.urlopen(req, timeout=30) as r:
    ctype = r.headers.get("Content-Type", "")
    text = r.read().decode("utf-8")
print("CONTENT_TYPE " + ctype)
for family in text_string_to_metric_families(text):
    for s in family.samples:
        print("SAMPLE " + json.dumps({
            "family": family.name,
            "type": family.type,
            "name": s.name,
            "labels": s.labels,
            "value": s.value,
        }))
