#!/usr/bin/env bash
# Fuzzes every HTTP API from its own OpenAPI document with schemathesis (docs/openapi.md), against
# the real stack: `npm start` on a temporary DATA_DIR and free ports, the demo key, an ADMIN_TOKEN,
# a test-run project's CI token and a panel API token of the platform's login.
#
#   bash bench/fuzz.sh            CI: a few examples per operation (FUZZ_MAX_EXAMPLES, default 3)
#   bash bench/fuzz.sh --long     longer: 100 examples per operation, the stateful phase too
#
# Exits non-zero on any failed check (5xx, an error body outside its envelope, a response that
# contradicts its schema, …). The summary goes to bench/fuzz-results.md (FUZZ_RESULTS to elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."
max_examples="${FUZZ_MAX_EXAMPLES:-3}"
phases="examples,coverage,fuzzing"
mode=ci
if [ "${1:-}" = "--long" ]; then
  max_examples=100
  phases="examples,coverage,fuzzing,stateful"
  mode=long
fi
results="${FUZZ_RESULTS:-bench/fuzz-results.md}"

bash bench/fuzz/install.sh >/dev/null
st=".tools/schemathesis-$(cat bench/fuzz/SCHEMATHESIS_VERSION)/bin/schemathesis"

work="$(mktemp -d)"
chmod 755 "$work" # embedded PostgreSQL runs as the postgres user when started as root
# free ports below the kernel's ephemeral range (as platform/ports.ts draws them), so no outgoing socket takes one first
read -r GATEWAY_PORT PANEL_PORT PANEL_HOSTING_WEB_PORT PANEL_HOSTING_TLS_PORT PANEL_NODE_API_PORT PANEL_HOSTING_DB_PORT TEMPORAL_PORT TEMPORAL_UI_PORT PG_PORT SIMULATOR_PORT < <(python3 -c '
import random, socket
ports = []
while len(ports) < 10:
    p = random.randint(20000, 32767)
    if p in ports: continue
    s = socket.socket()
    try: s.bind(("0.0.0.0", p))
    except OSError: continue
    finally: s.close()
    ports.append(p)
print(" ".join(map(str, ports)))')
export GATEWAY_PORT PANEL_PORT PANEL_HOSTING_WEB_PORT PANEL_HOSTING_TLS_PORT PANEL_NODE_API_PORT PANEL_HOSTING_DB_PORT TEMPORAL_PORT TEMPORAL_UI_PORT PG_PORT SIMULATOR_PORT
export DATA_DIR="$work/data" ADMIN_TOKEN="fuzz-admin-$RANDOM$RANDOM" LOG_LEVEL=warn
gw="http://127.0.0.1:$GATEWAY_PORT"
panel="http://127.0.0.1:$PANEL_PORT"

node_modules/.bin/tsx main/start.ts >"$work/start.log" 2>&1 &
stack=$!
stop() {
  kill -TERM "$stack" 2>/dev/null || true
  wait "$stack" 2>/dev/null || true
  rm -rf "$work"
}
trap stop EXIT
started=$(date +%s)
until grep -q 'Started in' "$work/start.log"; do
  if ! kill -0 "$stack" 2>/dev/null || [ $(($(date +%s) - started)) -gt 300 ]; then
    echo "fuzz: the stack did not start" >&2
    cat "$work/start.log" >&2
    exit 1
  fi
  sleep 1
done

json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

# Credentials: the demo key, a test-run project on it with a CI token, a panel API token.
demo_key="$(tr -d '\n' <"$DATA_DIR/demo-key")"
npm run -s admin -- project create --name fuzz --gateway-key "$demo_key" >/dev/null
ci_token="$(npm run -s admin -- ci-token create --project fuzz | json "['token']")"
panel_password="$(sed -n 's/^  Panel login  admin \/ \([^ ]*\) .*/\1/p' "$work/start.log")"
new_password="fuzz-$RANDOM$RANDOM-Pw!"
curl -sf -c "$work/jar" -D "$work/h1" -H 'content-type: application/json' -d "{\"username\":\"admin\",\"password\":\"$panel_password\"}" "$panel/v1/auth/sign-in" >/dev/null
csrf="$(sed -n 's/^x-csrf-token: \(.*\)\r$/\1/Ip' "$work/h1")"
curl -sf -b "$work/jar" -H "x-csrf-token: $csrf" -H 'content-type: application/json' -d "{\"current_password\":\"$panel_password\",\"new_password\":\"$new_password\"}" "$panel/v1/account/password" >/dev/null
curl -sf -c "$work/jar" -D "$work/h2" -H 'content-type: application/json' -d "{\"username\":\"admin\",\"password\":\"$new_password\"}" "$panel/v1/auth/sign-in" >/dev/null
csrf="$(sed -n 's/^x-csrf-token: \(.*\)\r$/\1/Ip' "$work/h2")"
panel_token="$(curl -sf -b "$work/jar" -H "x-csrf-token: $csrf" -H 'content-type: application/json' -d '{"name":"fuzz"}' "$panel/v1/account/tokens" | json "['token']")"

# name | document | credentials header | operations left out, with the reason
apis=(
  "gateway|$gw/openapi.json|Authorization: Bearer $demo_key"
  "admin|$gw/admin/openapi.json|Authorization: Bearer $ADMIN_TOKEN"
  "testruns|$gw/testruns/openapi.json|Authorization: Bearer $ci_token"
  "panel|$panel/openapi.json|Authorization: Bearer $panel_token"
)
# --exclude-checks positive_data_acceptance: a schema-valid request may still be refused by a rule no
# schema states (an unknown id or model, a cursor not from this listing, a node that does not exist);
# those are 4xx answers in the envelope, which the other checks verify. --workers 1: CPython 3.11's
# AST is not thread-safe in hypothesis' lambda descriptions (a runtime error with 2 workers).
# The fuzzer's own session must survive: signing out or revoking its token would leave the rest
# of the run unauthenticated (both are covered by test/panel).
panel_exclude=(--exclude-path /v1/auth/sign-out --exclude-path /v1/account/tokens/{id} --exclude-path /v1/account/password)

{
  echo "# Fuzzing results"
  echo
  echo "Written by \`bash bench/fuzz.sh${1:+ $1}\` (schemathesis $(cat bench/fuzz/SCHEMATHESIS_VERSION), $mode: --max-examples $max_examples, phases $phases, --checks all) on $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD)."
  echo
} >"$work/results.md"

status=0
for entry in "${apis[@]}"; do
  IFS='|' read -r name doc auth <<<"$entry"
  extra=()
  [ "$name" = panel ] && extra=("${panel_exclude[@]}")
  t0=$(date +%s)
  set +e
  NO_COLOR=1 "$st" --config-file bench/fuzz/schemathesis.toml run "$doc" --checks all --exclude-checks positive_data_acceptance --max-examples "$max_examples" --phases "$phases" --workers 1 --seed 24 \
    --header "$auth" --request-timeout 30 --no-color --generation-database none \
    --suppress-health-check all "${extra[@]}" >"$work/$name.log" 2>&1
  code=$?
  set -e
  [ "$code" = 0 ] || status=1
  {
    echo "## $name ($doc) — exit $code, $(($(date +%s) - t0)) s"
    echo
    echo '```'
    sed -n '/^=* *SUMMARY *=*$/,$p' "$work/$name.log" | head -80
    echo '```'
    echo
  } >>"$work/results.md"
  echo "fuzz: $name exit $code"
  if [ "$code" != 0 ]; then cp "$work/$name.log" "${FUZZ_LOG_DIR:-/tmp}/fuzz-$name.log"; fi
done
mkdir -p "$(dirname "$results")"
cp "$work/results.md" "$results"
exit "$status"
