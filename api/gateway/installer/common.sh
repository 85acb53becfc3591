# Shared by install.sh and uninstall.sh: the gateway splices this file into either script in
# place of its marker line when it serves it, so each served script stays self-contained.

say() { printf '%s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

SUMMARY=()
# One line per step, printed now and again at the end; status: ok | skipped | would change.
summary() { SUMMARY+=("$(printf '%-14s %-7s %s' "[$1]" "$2" "$3")"); printf '%-14s %-7s %s\n' "[$1]" "$2" "$3"; }
# split_list VAR LIST: LIST (commas or spaces) into the array VAR, without glob expansion.
split_list() { IFS=', ' read -r -a "$1" <<<"$2"; }

TMPDIR_GW=$(mktemp -d)
trap 'rm -rf "$TMPDIR_GW"' EXIT
tmpfile() { mktemp "$TMPDIR_GW/f.XXXXXX"; }

# Prompts come from the terminal; with `curl ... | bash` stdin is the script itself, so /dev/tty
# is used when it can be opened, else stdin (piped answers, CI).
setup_input() {
  if [ -t 0 ]; then
    exec 3<&0
  elif (exec </dev/tty) 2>/dev/null; then
    exec 3</dev/tty
  else
    exec 3<&0
  fi
}

trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; s=${s%"${s##*[![:space:]]}"}; printf '%s' "$s"; }

# ask VAR PROMPT [DEFAULT] [secret]; end of input means the default.
ask() {
  local _var=$1 _prompt=$2 _def=${3-} _secret=${4-} _ans=
  if [ -n "$_def" ]; then printf '%s [%s]: ' "$_prompt" "$_def"; else printf '%s: ' "$_prompt"; fi
  if [ -n "$_secret" ] && [ -t 3 ]; then
    IFS= read -r -s _ans <&3 || _ans=
  else
    IFS= read -r _ans <&3 || _ans=
  fi
  [ -t 3 ] && [ -z "$_secret" ] || printf '\n'
  _ans=$(trim "$_ans")
  [ -n "$_ans" ] || _ans=$_def
  printf -v "$_var" '%s' "$_ans"
}

# A path as the user knows it: ~/... under HOME (a literal tilde, for display only).
# shellcheck disable=SC2088
tilde() { case $1 in "$HOME"/*) printf '~/%s' "${1#"$HOME"/}" ;; *) printf '%s' "$1" ;; esac; }

# --- JSON: python3, else node; GATEWAY_JSON_TOOL=python3|node|none overrides (for tests) ------

# Two JSON files are edited: Claude Code's settings (GW_KIND=claude: env.ANTHROPIC_* entries) and
# llm's keys.json (GW_KIND=llm: the key named "gateway"). Entries are ours when they point here or
# hold a gateway key; everything else in the file is kept as it was.
read -r -d '' PY_JSON <<'EOF' || true
import json, os, re, sys
mode, src = sys.argv[1], sys.argv[2]
if mode == 'models':
    items = json.load(open(src, encoding='utf-8')).get('data') or []
    text = [m['id'] for m in items if 'text' in (m.get('capabilities') or [])]
    print('\n'.join(text or [m['id'] for m in items]))
    sys.exit(0)
dst, base, kind = sys.argv[3], os.environ['GW_BASE'], os.environ.get('GW_KIND', 'claude')
gateway_key = lambda v: bool(re.match(r'(gw_ai_|rk_live_|mt-)', str(v or '')))
raw = open(src, encoding='utf-8').read() if os.path.exists(src) else ''
try:
    data = json.loads(raw) if raw.strip() else {}
except ValueError as e:
    sys.stderr.write('not valid JSON: %s\n' % e); sys.exit(3)
if not isinstance(data, dict) or (kind == 'claude' and not isinstance(data.get('env', {}), dict)):
    sys.stderr.write('not a JSON object with an "env" object\n' if kind == 'claude' else 'not a JSON object\n'); sys.exit(3)
before = json.loads(json.dumps(data))
m = re.search(r'^([ \t]+)"', raw, re.M)
if kind == 'claude':
    env = data.get('env')
    # The gateway entry: ANTHROPIC_BASE_URL is this gateway, or the token is a gateway key.
    if env and env.get('ANTHROPIC_BASE_URL') and (env.get('ANTHROPIC_BASE_URL') == base or gateway_key(env.get('ANTHROPIC_AUTH_TOKEN'))):
        for k in ('ANTHROPIC_BASE_URL', 'ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_MODEL'):
            env.pop(k, None)
        if not env:
            del data['env']
    if mode == 'set':
        env = data.setdefault('env', {})
        env['ANTHROPIC_BASE_URL'] = base
        env['ANTHROPIC_AUTH_TOKEN'] = os.environ['GW_KEY']
        env['ANTHROPIC_MODEL'] = os.environ['GW_MODEL']
else:
    if gateway_key(data.get('gateway')):
        del data['gateway']
    if mode == 'set':
        if 'gateway' in data:
            sys.stderr.write('it already stores a key named "gateway" that is not a gateway key; left alone\n'); sys.exit(3)
        data['gateway'] = os.environ['GW_KEY']
out = raw if data == before else json.dumps(data, indent=m.group(1) if m else '  ', ensure_ascii=False) + '\n'
open(dst, 'w', encoding='utf-8').write(out)
EOF

read -r -d '' JS_JSON <<'EOF' || true
const fs = require('fs');
const [mode, src, dst] = process.argv.slice(1);
if (mode === 'models') {
  const items = JSON.parse(fs.readFileSync(src, 'utf8')).data || [];
  const text = items.filter((m) => (m.capabilities || []).includes('text')).map((m) => m.id);
  console.log((text.length ? text : items.map((m) => m.id)).join('\n'));
  process.exit(0);
}
const base = process.env.GW_BASE;
const kind = process.env.GW_KIND || 'claude';
const gatewayKey = (v) => /^(gw_ai_|rk_live_|mt-)/.test(String(v || ''));
const raw = fs.existsSync(src) ? fs.readFileSync(src, 'utf8') : '';
let data;
try { data = raw.trim() ? JSON.parse(raw) : {}; } catch (e) { console.error('not valid JSON: ' + e.message); process.exit(3); }
const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
if (!isObj(data) || (kind === 'claude' && data.env !== undefined && !isObj(data.env))) { console.error(kind === 'claude' ? 'not a JSON object with an "env" object' : 'not a JSON object'); process.exit(3); }
const canon = (v) => Array.isArray(v) ? v.map(canon) : isObj(v) ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canon(v[k])])) : v;
const before = JSON.stringify(canon(data));
const m = /^([ \t]+)"/m.exec(raw);
if (kind === 'claude') {
  let env = data.env;
  if (env && env.ANTHROPIC_BASE_URL && (env.ANTHROPIC_BASE_URL === base || gatewayKey(env.ANTHROPIC_AUTH_TOKEN))) {
    for (const k of ['ANTHROPIC_BASE_URL', 'ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_MODEL']) delete env[k];
    if (!Object.keys(env).length) delete data.env;
  }
  if (mode === 'set') {
    env = data.env = data.env || {};
    env.ANTHROPIC_BASE_URL = base;
    env.ANTHROPIC_AUTH_TOKEN = process.env.GW_KEY;
    env.ANTHROPIC_MODEL = process.env.GW_MODEL;
  }
} else {
  if (gatewayKey(data.gateway)) delete data.gateway;
  if (mode === 'set') {
    if ('gateway' in data) { console.error('it already stores a key named "gateway" that is not a gateway key; left alone'); process.exit(3); }
    data.gateway = process.env.GW_KEY;
  }
}
const out = JSON.stringify(canon(data)) === before ? raw : JSON.stringify(data, null, m ? m[1] : '  ') + '\n';
fs.writeFileSync(dst, out);
EOF

JSON_TOOL=
pick_json_tool() {
  case ${GATEWAY_JSON_TOOL:-} in
    none) JSON_TOOL= ; return ;;
    python3|node) JSON_TOOL=$GATEWAY_JSON_TOOL; return ;;
  esac
  if command -v python3 >/dev/null 2>&1 && python3 -c 'import json' >/dev/null 2>&1; then JSON_TOOL=python3
  elif command -v node >/dev/null 2>&1; then JSON_TOOL=node
  else JSON_TOOL=
  fi
}

# json_tool MODE SRC [DST]; GW_BASE/GW_KEY/GW_MODEL come from the environment (not argv, so the
# key does not show in the process list).
json_tool() {
  if [ "$JSON_TOOL" = python3 ]; then python3 -c "$PY_JSON" "$@"; else node -e "$JS_JSON" "$@"; fi
}

# --- where the tools keep their settings, and what the installer created -----------------------

# llm's user directory, as llm finds it: LLM_USER_PATH, else click's app dir for io.datasette.llm.
llm_dir() {
  if [ -n "${LLM_USER_PATH:-}" ]; then printf '%s' "$LLM_USER_PATH"
  elif [ "$(uname -s 2>/dev/null)" = Darwin ]; then printf '%s' "$HOME/Library/Application Support/io.datasette.llm"
  else printf '%s' "${XDG_CONFIG_HOME:-$HOME/.config}/io.datasette.llm"
  fi
}

# The files the installer created (one path a line): the uninstaller deletes such a file once it
# holds nothing but the gateway's entries, instead of leaving an empty file behind.
MANIFEST=${XDG_STATE_HOME:-$HOME/.local/state}/gateway-installer/created-files
manifest_has() { [ -f "$MANIFEST" ] && grep -qxF -- "$1" "$MANIFEST"; }
manifest_add() {
  manifest_has "$1" && return 0
  mkdir -p "$(dirname "$MANIFEST")"
  (umask 077 && printf '%s\n' "$1" >>"$MANIFEST")
}
# Keeps the lines of files that still exist and are not FILE; an empty manifest is deleted.
manifest_drop() {
  local t line
  [ -f "$MANIFEST" ] || return 0
  t=$(tmpfile)
  while IFS= read -r line; do
    if [ "$line" != "${1-}" ] && [ -e "$line" ]; then printf '%s\n' "$line"; fi
  done <"$MANIFEST" >"$t"
  if [ -s "$t" ]; then cat "$t" >"$MANIFEST"; else rm -f "$MANIFEST"; rmdir "$(dirname "$MANIFEST")" 2>/dev/null || true; fi
}

# Nothing left but white space (a text file) or an empty object (a JSON file).
holds_nothing() { local t; t=$(tr -d '[:space:]' <"$1"); [ -z "$t" ] || [ "$t" = '{}' ]; }

# --- text blocks -------------------------------------------------------------------------------

# cat FILE, ending with a newline when it has content, so a block appended after it starts a line.
cat_nl() { cat "$1"; if [ -s "$1" ] && [ -n "$(tail -c 1 "$1")" ]; then printf '\n'; fi; }

# A YAML double-quoted scalar.
yaml_str() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }

# strip_blocks IN OUT [restore]: OUT = IN without the gateway blocks (and, with restore, with the
# lines commented out by the installer restored). Returns 0 when something was removed, 1 when
# IN had nothing of ours (OUT is then a byte copy), 2 when a block is not closed (OUT = IN).
strip_blocks() {
  local rc=0
  [ -e "$1" ] || { : >"$2"; return 1; }
  awk -v b="$MARK_BEGIN" -v e="$MARK_END" -v p="$DISABLED_PREFIX" -v restore="${3:-}" '
    skip { held = held $0 "\n"; if ($0 == e) { skip = 0; held = "" } ; next }
    $0 == b { skip = 1; found = 1; held = $0 "\n"; next }
    restore != "" && index($0, p) == 1 { print substr($0, length(p) + 1); found = 1; next }
    { print }
    END { if (skip) { printf "%s", held; exit 2 } exit found ? 0 : 1 }' "$1" >"$2" || rc=$?
  if [ "$rc" = 1 ]; then cp "$1" "$2"; fi
  if [ "$rc" = 2 ]; then cp "$1" "$2"; fi
  return "$rc"
}

# Literal API keys of other providers (our own entries are stripped before this is asked).
has_foreign_key() {
  local q="[\"']?"
  grep -Eq \
    -e '(^|[^A-Za-z0-9_-])(sk-[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{30,}|gsk_[A-Za-z0-9]{20,}|xai-[A-Za-z0-9]{20,})' \
    -e "(OPENAI|ANTHROPIC|GEMINI|GOOGLE|MISTRAL|GROQ|XAI|DEEPSEEK|OPENROUTER|TOGETHER|COHERE|PERPLEXITY|FIREWORKS|AZURE_OPENAI)_API_KEY${q}[[:space:]]*[:=][[:space:]]*${q}[A-Za-z0-9]" \
    -e "ANTHROPIC_AUTH_TOKEN${q}[[:space:]]*[:=][[:space:]]*${q}[A-Za-z0-9]" \
    "$1"
}

# take_backup FILE: copies FILE to FILE.bak-YYYYmmdd-HHMMSS and prints that name. Readable by the
# owner only (0600): a backup can hold the gateway key, whatever the mode of FILE.
take_backup() {
  local b
  b="$1.bak-$(date +%Y%m%d-%H%M%S)"
  # Never overwrite an earlier backup taken within the same second.
  while [ -e "$b" ]; do sleep 1; b="$1.bak-$(date +%Y%m%d-%H%M%S)"; done
  (umask 077 && cp -- "$1" "$b") || return 1
  chmod 600 "$b"
  printf '%s' "$b"
}

# step_apps PROMPT: the applications to act on, from --apps/--all or asked; APPS becomes a,b.
step_apps() {
  local a list out=()
  if [ "$ALL" = 1 ]; then APPS=all; fi
  [ -n "$APPS" ] || ask APPS "$1" all
  [ "$APPS" != all ] || APPS=$ALL_APPS
  split_list list "$APPS"
  for a in "${list[@]}"; do
    case " $ALL_APPS " in *" $a "*) ;; *) die "unknown application '$a' (choose from: $ALL_APPS)" ;; esac
    [[ " ${out[*]-} " == *" $a "* ]] || out+=("$a")
  done
  [ "${#out[@]}" -gt 0 ] || die 'no application chosen'
  APPS=$(IFS=,; printf '%s' "${out[*]}")
  summary ok apps "${APPS//,/, }"
}
