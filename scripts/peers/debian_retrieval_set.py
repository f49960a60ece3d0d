"""A retrieval set from public data: Debian's English package descriptions (bookworm
main, `Translation-en`, fetched by apt). Each kept package gives one document, its long
description, and one query, its one-line synopsis, whose only relevant document is that
description. Packages whose long description repeats another's first paragraph (e.g.
`foo`, `foo-data`, `foo-doc`) are dropped, so every query has one right answer.

Usage: debian_retrieval_set.py TRANSLATION_EN OUT.json [DOCS] [QUERIES]
Writes {"docs": [...], "queries": [{"text", "relevant"}], "fingerprint"}.
"""
import hashlib
import json
import sys

path, out = sys.argv[1], sys.argv[2]
n_docs = int(sys.argv[3]) if len(sys.argv) > 3 else 4000
n_queries = int(sys.argv[4]) if len(sys.argv) > 4 else 800

entries = []
for block in open(path, encoding="utf-8").read().split("\n\n"):
    pkg, synopsis, body = None, None, []
    for line in block.split("\n"):
        if line.startswith("Package: "):
            pkg = line[9:].strip()
        elif line.startswith("Description-en: "):
            synopsis = line[16:].strip()
        elif line.startswith(" ") and synopsis is not None:
            body.append("" if line.strip() == "." else line.strip())
    if pkg and synopsis and body:
        paragraphs = [p for p in "\n".join(body).split("\n\n") if p.strip()]
        text = "\n\n".join(" ".join(p.split()) for p in paragraphs)
        words = len(text.split())
        if 30 <= words <= 250:
            entries.append((pkg, synopsis, paragraphs[0], text))

entries.sort()
seen_first, seen_synopsis, kept = set(), set(), []
for pkg, synopsis, first, text in entries:
    key = " ".join(first.split()).lower()
    if key in seen_first or synopsis.lower() in seen_synopsis:
        continue
    seen_first.add(key)
    seen_synopsis.add(synopsis.lower())
    kept.append((pkg, synopsis, text))

step = max(1, len(kept) // n_docs)
docs = kept[::step][:n_docs]
qstep = max(1, len(docs) // n_queries)
queries = [{"text": docs[i][1], "relevant": i, "package": docs[i][0]}
           for i in range(0, len(docs), qstep)][:n_queries]
h = hashlib.sha256()
for pkg, synopsis, text in docs:
    h.update(f"{pkg}\0{synopsis}\0{text}\0".encode())
json.dump({"docs": [d[2] for d in docs], "queries": queries,
           "fingerprint": h.hexdigest()[:16]}, open(out, "w"))
print(f"{len(docs)} documents, {len(queries)} queries (of {len(kept)} distinct "
      f"packages), fingerprint {h.hexdigest()[:16]}", file=sys.stderr)
