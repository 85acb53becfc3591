#!/usr/bin/env bash
# Gateway uninstaller: removes what install.sh added for this gateway.
#
#   curl -fsSL __GATEWAY_BASE_URL__/uninstall.sh | bash
#   bash uninstall.sh --level entries|reset [--apps claude,codex,shell,llm,aider | --all] [--dry-run] [--yes]
#
# Levels: entries removes the gateway entries only (every backup is kept); reset also deletes the
# <file>.bak-YYYYmmdd-HHMMSS backups of those files, and the copy this run takes of each file
# once the file is written. Before a file is written it is copied to <file>.bak-YYYYmmdd-HHMMSS
# (mode 0600), unless it holds API keys of other providers. A file install.sh created is deleted
# instead when nothing but the gateway entries is in it.
set -euo pipefail

# Filled in by the gateway that serves this file.
BASE_URL='__GATEWAY_BASE_URL__'
MARK_BEGIN='# >>> gateway >>>'
MARK_END='# <<< gateway <<<'
# install.sh comments out the user's own codex and aider lines with this prefix; they are restored.
DISABLED_PREFIX='# [gateway] '
ALL_APPS='claude codex shell llm aider'

usage() {
  cat <<EOF
Usage: uninstall.sh [options]
  --level entries  remove the gateway entries, keep every backup
  --level reset    also delete every .bak-* backup of those files (they can hold the key)
  --apps a,b       applications to clean: claude, codex, shell, llm, aider
  --all            every application
  --dry-run        print what would be removed and change nothing
  --yes            do not ask for confirmation
  --base-url URL   gateway address (default: $BASE_URL)
EOF
}

__GATEWAY_COMMON__

# --- the plan: files to write and old backups to delete, written by apply_plan ----------------

PLAN_FILE=() PLAN_NEW=() PLAN_BACKUP=() PLAN_APP=() PLAN_DELETE=() OLD_BACKUPS=()

# plan_strip APP FILE STRIPPED RC [WHAT]: queue FILE := STRIPPED when the strip found something
# (RC 0), or its deletion when install.sh created it and nothing else is in it; WHAT describes
# the removed entries, else the removed lines are shown.
plan_strip() {
  local app=$1 file=$2 stripped=$3 rc=$4 backup=0 delete=0 note action
  case $rc in
    1) summary ok "$app" "$(tilde "$file"): no gateway entry"; return ;;
    2) summary skipped "$app" "$(tilde "$file") has a '$MARK_BEGIN' line without '$MARK_END'; fix it by hand"; return ;;
  esac
  if holds_nothing "$stripped" && manifest_has "$file"; then
    delete=1 action='delete it' note='the installer created it and nothing else is in it'
  else
    action='remove the gateway entries'
    if has_foreign_key "$stripped"; then note='no backup: it holds API keys of other providers'; else backup=1; note='backup first'; fi
  fi
  PLAN_FILE+=("$file") PLAN_NEW+=("$stripped") PLAN_BACKUP+=("$backup") PLAN_APP+=("$app") PLAN_DELETE+=("$delete")
  if [ "$DRY_RUN" = 1 ]; then
    summary 'would change' "$app" "$(tilde "$file"): $action ($note)"
  else
    say "  will $action: $(tilde "$file") ($note)"
  fi
  if [ -n "${5:-}" ]; then
    say "$5"
  else
    # Removed lines as "-", restored ones as "~"; gateway keys masked.
    { diff "$file" "$stripped" 2>/dev/null || true; } | sed -n 's/^< /      - /p; s/^> /      ~ /p' |
      sed -E 's/((gw_ai_|rk_live_|mt-)[A-Za-z0-9_-]{4})[A-Za-z0-9_-]+/\1.../g'
  fi
}

# Old backups of FILE (reset level), listed before this run writes anything.
plan_backups() {
  local app=$1 file=$2 b
  [ "$LEVEL" = reset ] || return 0
  for b in "$file".bak-*; do
    [ -f "$b" ] && [[ $b =~ \.bak-[0-9]{8}-[0-9]{6}$ ]] || continue
    OLD_BACKUPS+=("$b")
    if [ "$DRY_RUN" = 1 ]; then summary 'would change' "$app" "delete $(tilde "$b")"; else say "  will delete $(tilde "$b")"; fi
  done
}

plan_claude() {
  local file=$HOME/.claude/settings.json stripped rc=0
  plan_backups claude "$file"
  [ -e "$file" ] || { summary ok claude "$(tilde "$file") does not exist"; return; }
  if [ -z "$JSON_TOOL" ]; then
    summary skipped claude 'neither python3 nor node is installed to edit ~/.claude/settings.json'
    return
  fi
  stripped=$(tmpfile)
  if ! GW_BASE=$BASE_URL json_tool strip "$file" "$stripped" 2>"$TMPDIR_GW/err"; then
    summary skipped claude "$(tilde "$file"): $(cat "$TMPDIR_GW/err")"
    return
  fi
  # The JSON tool copies the file byte for byte when it holds no gateway entry.
  if cmp -s "$file" "$stripped"; then rc=1; fi
  plan_strip claude "$file" "$stripped" "$rc" '      - env.ANTHROPIC_BASE_URL, env.ANTHROPIC_AUTH_TOKEN, env.ANTHROPIC_MODEL'
}

# plan_text APP FILE [restore]: a file whose gateway entries are marked blocks.
plan_text() {
  local app=$1 file=$2 stripped rc=0
  plan_backups "$app" "$file"
  [ -e "$file" ] || { summary ok "$app" "$(tilde "$file") does not exist"; return; }
  stripped=$(tmpfile)
  strip_blocks "$file" "$stripped" ${3:+"$3"} || rc=$?
  plan_strip "$app" "$file" "$stripped" "$rc"
}

plan_codex() { plan_text codex "$HOME/.codex/config.toml" restore; }

plan_aider() { plan_text aider "$HOME/.aider.conf.yml" restore; }

# llm: the block of extra-openai-models.yaml, and the key named "gateway" in keys.json.
plan_llm() {
  local dir keys stripped rc=0
  dir=$(llm_dir)
  keys=$dir/keys.json
  plan_text llm "$dir/extra-openai-models.yaml"
  plan_backups llm "$keys"
  [ -e "$keys" ] || { summary ok llm "$(tilde "$keys") does not exist"; return; }
  if [ -z "$JSON_TOOL" ]; then
    summary skipped llm "neither python3 nor node is installed to edit $(tilde "$keys")"
    return
  fi
  stripped=$(tmpfile)
  if ! GW_BASE=$BASE_URL GW_KIND=llm json_tool strip "$keys" "$stripped" 2>"$TMPDIR_GW/err"; then
    summary skipped llm "$(tilde "$keys"): $(cat "$TMPDIR_GW/err")"
    return
  fi
  if cmp -s "$keys" "$stripped"; then rc=1; fi
  plan_strip llm "$keys" "$stripped" "$rc" '      - gateway (the key llm sends to the gateway)'
}

plan_shell() {
  local file any=0
  for file in "$HOME/.bashrc" "$HOME/.zshrc" "$HOME/.profile"; do
    if [ -e "$file" ]; then any=1; plan_text shell "$file"; else plan_backups shell "$file"; fi
  done
  [ "$any" = 1 ] || summary ok shell 'no shell profile exists'
}

apply_plan() {
  local i file b
  for i in "${!PLAN_FILE[@]}"; do
    file=${PLAN_FILE[$i]}
    b=
    if [ "${PLAN_DELETE[$i]}" = 1 ]; then
      rm -f -- "$file"
      summary ok "${PLAN_APP[$i]}" "deleted $(tilde "$file") (the installer created it)"
      continue
    fi
    if [ "${PLAN_BACKUP[$i]}" = 1 ]; then
      b=$(take_backup "$file") || die "cannot back up $(tilde "$file")"
      summary ok backup "$(tilde "$b")"
    fi
    # Writing through the existing file keeps its mode and any symlink.
    cat "${PLAN_NEW[$i]}" >"$file"
    summary ok "${PLAN_APP[$i]}" "removed the gateway entries from $(tilde "$file")"
    # The copy guarded the write; it holds the gateway key, which a full reset removes everywhere.
    if [ -n "$b" ] && [ "$LEVEL" = reset ]; then
      rm -f -- "$b"
      summary ok reset "deleted $(tilde "$b") (it held the gateway key)"
    fi
  done
  # The backups listed before this run.
  for b in "${OLD_BACKUPS[@]+"${OLD_BACKUPS[@]}"}"; do
    rm -f -- "$b"
    summary ok reset "deleted $(tilde "$b")"
  done
  # A file whose entries are gone is the user's from now on (or deleted): no longer listed.
  for file in "${PLAN_FILE[@]+"${PLAN_FILE[@]}"}"; do manifest_drop "$file"; done
}

# --- steps ------------------------------------------------------------------------------------

LEVEL='' APPS='' ALL=0 DRY_RUN=0 YES=0

step_level() {
  if [ -z "$LEVEL" ]; then
    say 'What should be removed?'
    say '  1) entries: the gateway entries only; every backup is kept'
    say '  2) reset:   the gateway entries and every .bak-* backup of those files'
    ask LEVEL 'Level (1/entries or 2/reset)' 1
  fi
  case $LEVEL in
    1|entries) LEVEL=entries ;;
    2|reset) LEVEL=reset ;;
    *) die "unknown level '$LEVEL' (entries or reset)" ;;
  esac
  summary ok level "$LEVEL"
}

main() {
  while [ $# -gt 0 ]; do
    case $1 in
      --level) LEVEL=${2-}; shift ;;
      --apps) APPS=${2-}; shift ;;
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
  say "Gateway uninstaller for $BASE_URL$([ "$DRY_RUN" = 1 ] && printf ' (dry run: nothing is changed)')"

  step_level
  step_apps 'Applications to clean: claude, codex, shell, llm, aider; comma-separated or "all"'
  local app answer apps
  split_list apps "$APPS"
  for app in "${apps[@]}"; do "plan_$app"; done

  if [ $(( ${#PLAN_FILE[@]} + ${#OLD_BACKUPS[@]} )) -eq 0 ]; then
    say 'Nothing to remove.'
  elif [ "$DRY_RUN" = 1 ]; then
    say "Dry run: ${#PLAN_FILE[@]} file(s) would change, ${#OLD_BACKUPS[@]} backup(s) would be deleted; nothing was changed."
  else
    if [ "$YES" != 1 ]; then
      ask answer "Change ${#PLAN_FILE[@]} file(s) and delete ${#OLD_BACKUPS[@]} backup(s)? [Y/n]"
      case $answer in ''|[Yy]*) ;; *) say 'Nothing changed.'; exit 1 ;; esac
    fi
    apply_plan
  fi
  say ''
  say 'Summary:'
  printf '  %s\n' "${SUMMARY[@]}"
}

main "$@"
