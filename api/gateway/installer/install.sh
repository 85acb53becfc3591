#!/usr/bin/env bash
# Gateway installer: points Claude Code, the OpenAI Codex CLI, llm, aider and shell variables at
# this gateway.
#
#   curl -fsSL __GATEWAY_BASE_URL__/install.sh | bash
#   bash install.sh --key KEY --apps claude,codex,shell,llm,aider --models m1,m2 --yes
#   bash install.sh --all --dry-run          # print every planned change, write nothing
#
# Every file is copied to <file>.bak-YYYYmmdd-HHMMSS before it is written, unless it holds API
# keys of other providers (then no copy is made and only the gateway entry is touched).
# Re-running replaces the installer's own entries. uninstall.sh removes them, and deletes the files
# this script created once nothing else is in them.
set -euo pipefail

# Filled in by the gateway that serves this file.
BASE_URL='__GATEWAY_BASE_URL__'
MARK_BEGIN='# >>> gateway >>>'
MARK_END='# <<< gateway <<<'
# Codex rejects duplicate top-level keys (and aider would take the last), so the user's own lines
# for the keys the gateway block sets are commented out with this prefix while the block is
# present; uninstall restores them.
DISABLED_PREFIX='# [gateway] '
ALL_APPS='claude codex shell llm aider'

usage() {
  cat <<EOF
Usage: install.sh [options]
  --key KEY        gateway API key (gw_ai_..., rk_live_... or mt-...); asked when missing
  --apps a,b       applications to configure: claude, codex, shell, llm, aider
  --all            configure every application
  --models m1,m2   models to offer; the first is the default
  --dry-run        print every planned change and write nothing
  --yes            do not ask for confirmation
  --base-url URL   gateway address (default: $BASE_URL)
EOF
}

mask() { printf '%s...' "${1:0:10}"; }

__GATEWAY_COMMON__

# --- the plan: files to write, filled by the plan_* functions, written by apply_plan -----------

PLAN_FILE=() PLAN_NEW=() PLAN_BACKUP=() PLAN_APP=()
PLANNED=0

# plan_file APP FILE NEW STRIPPED: queue FILE := NEW when it differs (PLANNED=1); prints the plan.
plan_file() {
  local app=$1 file=$2 new=$3 stripped=$4 backup=0 note
  PLANNED=0
  if [ -e "$file" ] && cmp -s "$file" "$new"; then
    summary ok "$app" "$(tilde "$file") already configured"
    return
  fi
  PLANNED=1
  if [ -e "$file" ]; then
    if has_foreign_key "$stripped"; then note='no backup: it holds API keys of other providers'; else backup=1; note='backup first'; fi
  else
    note='new file'
  fi
  PLAN_FILE+=("$file") PLAN_NEW+=("$new") PLAN_BACKUP+=("$backup") PLAN_APP+=("$app")
  if [ "$DRY_RUN" = 1 ]; then summary 'would change' "$app" "$(tilde "$file") ($note)"; else say "  will change $(tilde "$file") ($note)"; fi
}

# Shows what a queued text file gains: the gateway block lines, key masked.
show_block() {
  awk -v b="$MARK_BEGIN" -v e="$MARK_END" -v p="$DISABLED_PREFIX" '
    $0 == b { on = 1 } on { print "      + " $0 } $0 == e { on = 0 }
    !on && index($0, p) == 1 { print "      ~ comments out: " substr($0, length(p) + 1) }' "$1" |
    sed "s/$KEY/$(mask "$KEY")/g"
}

plan_claude() {
  local file=$HOME/.claude/settings.json stripped new
  if [ -z "$JSON_TOOL" ]; then
    summary skipped claude 'neither python3 nor node is installed to edit ~/.claude/settings.json'
    return
  fi
  stripped=$(tmpfile) new=$(tmpfile)
  if ! GW_BASE=$BASE_URL json_tool strip "$file" "$stripped" 2>"$TMPDIR_GW/err" ||
     ! GW_BASE=$BASE_URL GW_KEY=$KEY GW_MODEL=$DEFAULT_MODEL json_tool set "$file" "$new" 2>"$TMPDIR_GW/err"; then
    summary skipped claude "$(tilde "$file"): $(cat "$TMPDIR_GW/err")"
    return
  fi
  plan_file claude "$file" "$new" "$stripped"
  if [ "$PLANNED" = 1 ]; then
    say "      + env.ANTHROPIC_BASE_URL = $BASE_URL"
    say "      + env.ANTHROPIC_AUTH_TOKEN = $(mask "$KEY")"
    say "      + env.ANTHROPIC_MODEL = $DEFAULT_MODEL"
  fi
}

plan_codex() {
  local file=$HOME/.codex/config.toml stripped new rc=0
  stripped=$(tmpfile) new=$(tmpfile)
  strip_blocks "$file" "$stripped" restore || rc=$?
  if [ "$rc" = 2 ]; then summary skipped codex "$(tilde "$file") has a '$MARK_BEGIN' line without '$MARK_END'; fix it by hand"; return; fi
  if grep -Eq '^[[:space:]]*\[model_providers\.gateway\]' "$stripped"; then
    summary skipped codex "$(tilde "$file") already defines its own [model_providers.gateway]; left alone"
    return
  fi
  # Top-level keys must precede every table, so the model lines go first and the provider table last.
  {
    say "$MARK_BEGIN"
    say "# Added by the gateway installer ($BASE_URL); uninstall.sh removes it."
    say "model = \"$DEFAULT_MODEL\""
    say 'model_provider = "gateway"'
    say "$MARK_END"
    awk -v p="$DISABLED_PREFIX" '
      /^[[:space:]]*\[/ { table = 1 }
      !table && /^[[:space:]]*(model|model_provider)[[:space:]]*=/ { print p $0; next }
      { print }' "$stripped"
    say "$MARK_BEGIN"
    say '[model_providers.gateway]'
    say 'name = "Gateway"'
    say "base_url = \"$BASE_URL/v1\""
    say 'env_key = "GATEWAY_API_KEY"'
    say 'wire_api = "responses"'
    say "$MARK_END"
  } >"$new"
  plan_file codex "$file" "$new" "$stripped"
  if [ "$PLANNED" = 1 ]; then show_block "$new"; fi
  if [[ ",$APPS," != *,shell,* ]]; then
    say '      note: codex reads the key from $GATEWAY_API_KEY; add the shell app or export it yourself'
  fi
}

# llm (Simon Willison's CLI): an extra-openai-models.yaml entry per chosen model (gateway/<model>)
# and the key in keys.json under "gateway", which those entries name: llm would otherwise fall
# back to OPENAI_API_KEY, which may be the user's own OpenAI key.
plan_llm() {
  local dir models keys stripped new kstripped knew rc=0 m list
  dir=$(llm_dir)
  models=$dir/extra-openai-models.yaml keys=$dir/keys.json
  if [ -z "$JSON_TOOL" ]; then
    summary skipped llm "neither python3 nor node is installed to edit $(tilde "$keys")"
    return
  fi
  stripped=$(tmpfile) new=$(tmpfile) kstripped=$(tmpfile) knew=$(tmpfile)
  strip_blocks "$models" "$stripped" || rc=$?
  if [ "$rc" = 2 ]; then summary skipped llm "$(tilde "$models") has a '$MARK_BEGIN' line without '$MARK_END'; fix it by hand"; return; fi
  # The entries join the file's list: only a block list at column 0 (or an empty file) takes them.
  if ! awk '/^[[:space:]]*(#|$)/ { next } !seen { seen = 1; if ($0 !~ /^- /) bad = 1 } /^[^[:space:]]/ && !/^- / { bad = 1 } END { exit bad }' "$stripped"; then
    summary skipped llm "$(tilde "$models") is not a list of '- model_id: ...' entries at column 0; add the gateway's by hand"
    return
  fi
  if ! GW_BASE=$BASE_URL GW_KIND=llm json_tool strip "$keys" "$kstripped" 2>"$TMPDIR_GW/err" ||
     ! GW_BASE=$BASE_URL GW_KIND=llm GW_KEY=$KEY json_tool set "$keys" "$knew" 2>"$TMPDIR_GW/err"; then
    summary skipped llm "$(tilde "$keys"): $(cat "$TMPDIR_GW/err")"
    return
  fi
  split_list list "$MODELS"
  {
    cat_nl "$stripped"
    say "$MARK_BEGIN"
    say "# Added by the gateway installer ($BASE_URL); uninstall.sh removes this block."
    for m in "${list[@]}"; do
      say "- model_id: $(yaml_str "gateway/$m")"
      say "  model_name: $(yaml_str "$m")"
      say "  api_base: $(yaml_str "$BASE_URL/v1")"
      say '  api_key_name: gateway'
      say '  supports_tools: true' # every text model of the gateway takes tools (translated where needed)
    done
    say "$MARK_END"
  } >"$new"
  plan_file llm "$models" "$new" "$stripped"
  if [ "$PLANNED" = 1 ]; then show_block "$new"; fi
  plan_file llm "$keys" "$knew" "$kstripped"
  if [ "$PLANNED" = 1 ]; then say "      + gateway = $(mask "$KEY")"; fi
  say "      use: llm -m gateway/$DEFAULT_MODEL 'Hello'"
}

# aider: ~/.aider.conf.yml gets the OpenAI-compatible endpoint, the key and the default model
# (aider's `openai/` prefix sends it to openai-api-base).
plan_aider() {
  local file=$HOME/.aider.conf.yml stripped new rc=0
  stripped=$(tmpfile) new=$(tmpfile)
  strip_blocks "$file" "$stripped" restore || rc=$?
  if [ "$rc" = 2 ]; then summary skipped aider "$(tilde "$file") has a '$MARK_BEGIN' line without '$MARK_END'; fix it by hand"; return; fi
  {
    awk -v p="$DISABLED_PREFIX" '/^(model|openai-api-base|openai-api-key)[[:space:]]*:/ { print p $0; next } { print }' "$stripped" >"$TMPDIR_GW/aider"
    cat_nl "$TMPDIR_GW/aider"
    say "$MARK_BEGIN"
    say "# Added by the gateway installer ($BASE_URL); uninstall.sh removes this block."
    say "openai-api-base: $(yaml_str "$BASE_URL/v1")"
    say "openai-api-key: $(yaml_str "$KEY")"
    say "model: $(yaml_str "openai/$DEFAULT_MODEL")"
    say "$MARK_END"
  } >"$new"
  plan_file aider "$file" "$new" "$stripped"
  if [ "$PLANNED" = 1 ]; then show_block "$new"; fi
}

plan_shell() {
  local files=() file stripped new rc
  for file in "$HOME/.bashrc" "$HOME/.zshrc"; do [ -e "$file" ] && files+=("$file"); done
  [ "${#files[@]}" -gt 0 ] || files=("$HOME/.profile")
  for file in "${files[@]}"; do
    stripped=$(tmpfile) new=$(tmpfile) rc=0
    strip_blocks "$file" "$stripped" || rc=$?
    if [ "$rc" = 2 ]; then summary skipped shell "$(tilde "$file") has a '$MARK_BEGIN' line without '$MARK_END'; fix it by hand"; continue; fi
    {
      cat "$stripped"
      say "$MARK_BEGIN"
      say "# Added by the gateway installer ($BASE_URL); uninstall.sh removes this block."
      say "export GATEWAY_BASE_URL=\"$BASE_URL\""
      say "export GATEWAY_API_KEY=\"$KEY\""
      say "export GATEWAY_MODEL=\"$DEFAULT_MODEL\""
      say "export GATEWAY_MODELS=\"$MODELS\""
      # A key the user exports for OpenAI itself stays in charge, and OpenAI tools keep going to
      # OpenAI with it: pointing them here would send that key to the gateway.
      if ! grep -Eq '^[[:space:]]*(export[[:space:]]+)?OPENAI_API_KEY=' "$stripped"; then
        say "export OPENAI_BASE_URL=\"$BASE_URL/v1\""
        say 'export OPENAI_API_KEY="$GATEWAY_API_KEY"'
      fi
      say "$MARK_END"
    } >"$new"
    plan_file shell "$file" "$new" "$stripped"
    if [ "$PLANNED" = 1 ]; then show_block "$new"; fi
  done
}

apply_plan() {
  local i file b
  for i in "${!PLAN_FILE[@]}"; do
    file=${PLAN_FILE[$i]}
    mkdir -p "$(dirname "$file")"
    if [ -e "$file" ]; then
      if [ "${PLAN_BACKUP[$i]}" = 1 ]; then
        b=$(take_backup "$file") || die "cannot back up $(tilde "$file")"
        summary ok backup "$(tilde "$b")"
      fi
      # Writing through the existing file keeps its mode and any symlink.
      cat "${PLAN_NEW[$i]}" >"$file"
    else
      (umask 077 && cat "${PLAN_NEW[$i]}" >"$file")
      manifest_add "$file"
    fi
    summary ok "${PLAN_APP[$i]}" "wrote $(tilde "$file")"
  done
}

# --- steps ------------------------------------------------------------------------------------

KEY='' APPS='' MODELS='' ALL=0 DRY_RUN=0 YES=0 DEFAULT_MODEL=''
AVAILABLE=()

step_key() {
  local body code
  [ -n "$KEY" ] || ask KEY 'Gateway API key (the full key: gw_ai_..., rk_live_... or mt-...)' '' secret
  KEY=$(trim "$KEY")
  if [ -z "$KEY" ] && [ "$DRY_RUN" = 1 ]; then
    # A dry run writes nothing, so it needs no key: the plan shows placeholders, models unchecked.
    KEY='<API_KEY>'
    split_list AVAILABLE "${MODELS:-<model_id>}"
    summary skipped key 'dry run without a key: <API_KEY> stands for it; models are not checked'
    return
  fi
  [ -n "$KEY" ] || die 'no API key given'
  if ! [[ $KEY =~ ^(gw_ai_|rk_live_)[A-Za-z0-9_-]{16,}$ || $KEY =~ ^mt-[A-Za-z0-9_-]{43}$ ]]; then
    die 'this is not a gateway API key: paste the full key, starting with gw_ai_, rk_live_ or mt-'
  fi
  command -v curl >/dev/null 2>&1 || die 'curl is required'
  body=$(tmpfile)
  # The key goes to curl on stdin, not on its command line.
  code=$(printf 'header = "Authorization: Bearer %s"\n' "$KEY" |
    curl -sS -K - -o "$body" -w '%{http_code}' --connect-timeout 10 --max-time 30 "$BASE_URL/v1/models") ||
    die "cannot reach the gateway at $BASE_URL"
  case $code in
    200) ;;
    401|403) die "the gateway rejected the key (HTTP $code): check that it is the full key and that it is active" ;;
    *) die "the gateway answered HTTP $code to GET $BASE_URL/v1/models" ;;
  esac
  if [ -n "$JSON_TOOL" ]; then
    mapfile -t AVAILABLE < <(json_tool models "$body")
  else
    mapfile -t AVAILABLE < <(grep -o '"id":"[^"]*"' "$body" | sed 's/^"id":"//; s/"$//')
  fi
  [ "${#AVAILABLE[@]}" -gt 0 ] && [ -n "${AVAILABLE[0]}" ] || die 'the key may call no model'
  summary ok key "$(mask "$KEY") accepted; ${#AVAILABLE[@]} models available"
}

step_models() {
  local m i list out=()
  if [ -z "$MODELS" ]; then
    say 'Models this key may call:'
    for i in "${!AVAILABLE[@]}"; do say "  $((i + 1))) ${AVAILABLE[$i]}"; done
    ask MODELS 'Models (names or numbers, comma-separated; the first is the default)' "${AVAILABLE[0]}"
  fi
  split_list list "$MODELS"
  for m in "${list[@]}"; do
    if [[ $m =~ ^[0-9]+$ ]] && [ "$m" -ge 1 ] && [ "$m" -le "${#AVAILABLE[@]}" ]; then m=${AVAILABLE[$((m - 1))]}; fi
    [[ " ${AVAILABLE[*]} " == *" $m "* ]] || die "model '$m' is not available to this key (available: ${AVAILABLE[*]})"
    [[ " ${out[*]-} " == *" $m "* ]] || out+=("$m")
  done
  [ "${#out[@]}" -gt 0 ] || die 'no model chosen'
  DEFAULT_MODEL=${out[0]}
  MODELS=$(IFS=,; printf '%s' "${out[*]}")
  summary ok models "$DEFAULT_MODEL (default)${out[1]:+, ${MODELS#*,}}"
}

main() {
  while [ $# -gt 0 ]; do
    case $1 in
      --key) KEY=${2-}; shift ;;
      --apps) APPS=${2-}; shift ;;
      --models) MODELS=${2-}; shift ;;
      --base-url) BASE_URL=${2-}; shift ;;
      --all) ALL=1 ;;
      --dry-run) DRY_RUN=1 ;;
      --yes|-y) YES=1 ;;
      -h|--help) usage; exit 0 ;;
      *) usage >&2; die "unknown option $1" ;;
    esac
    shift
  done
  BASE_URL=${BASE_URL%/}
  local url_re='^https?://[][A-Za-z0-9.:-]+$'
  [[ $BASE_URL =~ $url_re ]] || die "invalid gateway address '$BASE_URL' (run the script served by the gateway, or pass --base-url)"
  setup_input
  pick_json_tool
  say "Gateway installer for $BASE_URL$([ "$DRY_RUN" = 1 ] && printf ' (dry run: nothing is written)')"

  step_key
  step_apps 'Applications to configure: claude (Claude Code), codex (Codex CLI), shell (environment variables), llm, aider; comma-separated or "all"'
  step_models
  local app answer apps
  split_list apps "$APPS"
  for app in "${apps[@]}"; do "plan_$app"; done

  if [ "${#PLAN_FILE[@]}" -eq 0 ]; then
    say 'Nothing to change.'
  elif [ "$DRY_RUN" = 1 ]; then
    say "Dry run: ${#PLAN_FILE[@]} file(s) would change; nothing was written."
  else
    if [ "$YES" != 1 ]; then
      ask answer "Write ${#PLAN_FILE[@]} file(s)? [Y/n]"
      case $answer in ''|[Yy]*) ;; *) say 'Nothing written.'; exit 1 ;; esac
    fi
    apply_plan
  fi
  say ''
  say 'Summary:'
  printf '  %s\n' "${SUMMARY[@]}"
  if [ "$DRY_RUN" != 1 ] && [[ ",$APPS," == *,shell,* ]]; then say 'Open a new terminal (or source your shell profile) to use the variables.'; fi
}

main "$@"
