#!/usr/bin/env bash
# Checks the layering rules of the house style with grep (comments and string literals
# are ignored). Layers, top to bottom:
#   api -> assistant -> jobs -> kb -> parse / chunk / retrieval / ml / store
# Only `store` names rusqlite, only `ml` candle, only `retrieval` usearch and tantivy,
# only `parse` the file-format crates; nothing in `api` names `store`; no layer names
# one above it. Prints each violation and exits 1 if there is any.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

failed=0

# Code lines of the Rust files under the given roots (a folder and its `x.rs`), as
# `file:line:code`, with string literals and `//` comments removed.
code() {
  local paths=()
  for root in "$@"; do
    [ -e "src/$root" ] && paths+=("src/$root")
    [ -e "src/$root.rs" ] && paths+=("src/$root.rs")
  done
  [ "${#paths[@]}" -eq 0 ] && return 0
  grep -rnH --include='*.rs' '' "${paths[@]}" |
    sed -E 's/"([^"\\]|\\.)*"/""/g; s#//.*$##' || true
}

# Every top-level module of src/ but the given ones.
others() {
  local all
  all=$(find src -mindepth 1 -maxdepth 1 \( -name '*.rs' -o -type d \) -printf '%f\n' |
    sed 's/\.rs$//' | sort -u)
  for m in $all; do
    case " $* " in *" $m "*) ;; *) echo "$m" ;; esac
  done
}

# rule DESCRIPTION REGEX ROOT... : no code line under ROOTs may match REGEX.
rule() {
  local what="$1" re="$2"
  shift 2
  local hits
  hits=$(code "$@" | grep -E -- "^[^:]+:[0-9]+:.*$re" || true)
  if [ -n "$hits" ]; then
    echo "layer rule broken: $what"
    echo "$hits" | sed 's/^/  /'
    failed=1
  fi
}

# shellcheck disable=SC2046
{
  rule "only store names rusqlite" '\brusqlite\b' $(others store)
  rule "only ml names candle" '\bcandle_(core|nn|transformers)\b' $(others ml)
  rule "only retrieval names usearch and tantivy" '\b(usearch|tantivy)\b' $(others retrieval)
  rule "only parse names the file-format crates" \
    '(^|[^:[:alnum:]_])(pdfium_render|tesseract|calamine|quick_xml|scraper|zip::|csv::|image::)' \
    $(others parse)
}
rule "api does not name store" '\bstore::|crate::store\b' api
rule "lower layers do not name kb, jobs, assistant, api or state" \
  'crate::(kb|jobs|assistant|api|state)\b' parse chunk retrieval ml store
rule "kb does not name jobs, assistant, api or state" 'crate::(jobs|assistant|api|state)\b' kb
rule "jobs does not name assistant, api or state" 'crate::(assistant|api|state)\b' jobs
rule "assistant does not name api or state" 'crate::(api|state)\b' assistant
rule "api/kb handlers use the contract's extractors (ApiJson, ApiQuery, ApiPath)" \
  '\b(axum::)?(extract::)?(Json|Query|Path)\((.*)\):' api/kb

if [ "$failed" -ne 0 ]; then
  exit 1
fi
echo "layers: ok"
