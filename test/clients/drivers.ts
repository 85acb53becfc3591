import type { ClientName } from './install';

// How the compatibility suite drives each real client non-interactively and reads its output:
// the command line of each case, and the client-side verdict (the answer it printed, the tool it
// ran, the usage it reported). The prompts carry the simulator's directives (simulator/README.md):
// `tokens=N` sizes the answer, `tool_call=NAME tool_arg=KEY` makes the model call one of the
// client's own tools with the text after the directive; the tool's output comes back as
// "Tool said: …", which proves the round trip.

export type CaseName = 'text' | 'tool' | 'stream';
export const CASES: readonly CaseName[] = ['text', 'tool', 'stream'];

/** Words the simulator streams in the stream case, each its own SSE event. */
export const STREAM_TOKENS = 48;

export interface Usage {
  input: number;
  output: number;
}

export interface ClientVerdict {
  ok: boolean;
  reason: string;
  /** token totals the client reported for the whole run, when it reports them */
  usage: Usage | null;
}

export interface Driver {
  /** the client's command line for a case (the binary comes first) */
  command(c: CaseName, model: string, marker: string, bin: string): string[];
  /** environment switches that turn off telemetry, update checks and error reporting */
  quietEnv: Record<string, string>;
  judge(c: CaseName, marker: string, out: string): ClientVerdict;
}

const prompt = (c: CaseName, marker: string, tool: string, arg: string): string =>
  c === 'text'
    ? `Say hello ${marker}`
    : c === 'tool'
      ? `[sim tool_call=${tool} tool_arg=${arg} tokens=64] echo ${marker}`
      : `[sim tokens=${STREAM_TOKENS}] Count ${marker}`;

/** What the simulator's final answer must look like for the case. */
function answerProblem(c: CaseName, marker: string, text: string): string | null {
  const words = text.trim().split(/\s+/);
  if (c === 'tool') return text.startsWith('Tool said:') && text.includes(marker) ? null : `final answer is not the tool result: "${clip(text)}"`;
  // No marker check here: a client may put its own context before the prompt (Claude Code's
  // system-reminder), and the echo of the first words fills the answer before the marker.
  if (!text.startsWith('Echo:')) return `unexpected answer: "${clip(text)}"`;
  if (c === 'stream' && words.length !== STREAM_TOKENS) return `streamed answer has ${words.length} words, expected ${STREAM_TOKENS}`;
  return null;
}

const clip = (s: string, n = 160) => (s.length > n ? `${s.slice(0, n)}…` : s).replace(/\s+/g, ' ');

function jsonLines(out: string): Array<Record<string, unknown>> {
  const lines: Array<Record<string, unknown>> = [];
  for (const line of out.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // a client's plain-text line that happens to start with a brace
    }
  }
  return lines;
}

const num = (v: unknown): number => (typeof v === 'number' ? v : 0);
const rec = (v: unknown): Record<string, unknown> => (typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {});

/**
 * Claude Code in print mode. text: `--output-format json` (one result object); tool and stream:
 * `stream-json --verbose` (every message, the tool_result included; stream adds the raw
 * `stream_event` deltas with --include-partial-messages). Bash may run `echo` only.
 */
const claudeCode: Driver = {
  command(c, model, marker, bin) {
    const format = c === 'text' ? ['--output-format', 'json'] : ['--output-format', 'stream-json', '--verbose', ...(c === 'stream' ? ['--include-partial-messages'] : [])];
    return [bin, '-p', prompt(c, marker, 'Bash', 'command'), '--model', model, '--max-turns', '4', '--allowedTools', 'Bash(echo:*)', ...format];
  },
  quietEnv: {
    DISABLE_TELEMETRY: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_ERROR_REPORTING: '1',
    DISABLE_BUG_COMMAND: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
  },
  judge(c, marker, out) {
    const lines = jsonLines(out);
    const result = lines.find((l) => l.type === 'result');
    if (!result) return { ok: false, reason: `no result object in the output: "${clip(out)}"`, usage: null };
    const u = rec(result.usage);
    const usage = { input: num(u.input_tokens) + num(u.cache_creation_input_tokens) + num(u.cache_read_input_tokens), output: num(u.output_tokens) };
    const text = String(result.result ?? '');
    if (result.is_error === true) return { ok: false, reason: `client error: ${clip(text, 120)}`, usage };
    if (c === 'tool') {
      const results = lines
        .filter((l) => l.type === 'user')
        .flatMap((l) => (Array.isArray(rec(l.message).content) ? (rec(l.message).content as unknown[]) : []))
        .map(rec)
        .filter((b) => b.type === 'tool_result');
      if (results.length === 0) return { ok: false, reason: 'the Bash tool never ran (no tool_result)', usage };
      const bad = results.find((b) => b.is_error === true || !JSON.stringify(b.content).includes(marker));
      if (bad) return { ok: false, reason: `tool result: ${clip(JSON.stringify(bad.content))}`, usage };
    }
    if (c === 'stream') {
      const deltas = lines.filter((l) => l.type === 'stream_event' && rec(rec(l.event).delta).type === 'text_delta').length;
      if (deltas < STREAM_TOKENS) return { ok: false, reason: `${deltas} text deltas streamed, expected ${STREAM_TOKENS}`, usage };
    }
    const problem = answerProblem(c, marker, text);
    return problem ? { ok: false, reason: problem, usage } : { ok: true, reason: '', usage };
  },
};

/** Codex `exec --json` (JSONL events); exec_command runs `echo` in Codex's default read-only sandbox. */
const codex: Driver = {
  command(c, model, marker, bin) {
    // features.plugins=false: without it every start syncs the plugin marketplace (github.com,
    // api.github.com, chatgpt.com), whatever the analytics and update settings say.
    const quiet = ['analytics.enabled=false', 'feedback.enabled=false', 'check_for_update_on_startup=false', 'otel.exporter="none"', 'features.plugins=false'].flatMap((kv) => ['-c', kv]);
    return [bin, 'exec', '--json', '--skip-git-repo-check', '-m', model, ...quiet, prompt(c, marker, 'exec_command', 'cmd')];
  },
  quietEnv: {},
  judge(c, marker, out) {
    const lines = jsonLines(out);
    const items = lines.filter((l) => l.type === 'item.completed').map((l) => rec(l.item));
    const usage = lines
      .filter((l) => l.type === 'turn.completed')
      .map((l) => rec(l.usage))
      .reduce<Usage | null>((sum, u) => ({ input: (sum?.input ?? 0) + num(u.input_tokens), output: (sum?.output ?? 0) + num(u.output_tokens) }), null);
    const failed = lines.find((l) => l.type === 'turn.failed' || l.type === 'error');
    if (failed) return { ok: false, reason: `client error: ${clip(String(failed.message ?? JSON.stringify(failed.error ?? failed)), 120)}`, usage };
    if (c === 'tool') {
      const command = items.find((i) => i.type === 'command_execution');
      if (!command) return { ok: false, reason: 'exec_command never ran', usage };
      if (command.exit_code !== 0 || !String(command.aggregated_output).includes(marker)) return { ok: false, reason: `command: exit ${String(command.exit_code)}, output "${clip(String(command.aggregated_output))}"`, usage };
    }
    const messages = items.filter((i) => i.type === 'agent_message');
    if (messages.length === 0) return { ok: false, reason: `no agent message: "${clip(out, 300)}"`, usage };
    const problem = answerProblem(c, marker, String(messages[messages.length - 1]!.text ?? ''));
    return problem ? { ok: false, reason: problem, usage } : { ok: true, reason: '', usage };
  },
};

/**
 * llm (Simon Willison's CLI) with `-u` (token usage per response on stderr). text: --no-stream;
 * stream: its default; tool: a Python function given with --functions, run by llm itself.
 */
const llm: Driver = {
  command(c, model, marker, bin) {
    if (c === 'tool') return [bin, '-m', `gateway/${model}`, '-u', '--functions', 'def shout(input: str) -> str:\n    return input.upper()', `[sim tool_call=shout tokens=16] ${marker}`];
    return [bin, '-m', `gateway/${model}`, '-u', ...(c === 'text' ? ['--no-stream'] : []), prompt(c, marker, '', '')];
  },
  quietEnv: {},
  judge(c, marker, out) {
    const counts = [...out.matchAll(/Token usage: ([\d,]+) input, ([\d,]+) output/g)];
    const usage = counts.length ? counts.reduce((s, m) => ({ input: s.input + Number(m[1]!.replace(/,/g, '')), output: s.output + Number(m[2]!.replace(/,/g, '')) }), { input: 0, output: 0 }) : null;
    const text = out.replace(/^Token usage:.*$/gm, '').trim();
    if (/^Error:/m.test(text)) return { ok: false, reason: `client error: ${clip(text, 120)}`, usage };
    // The tool upper-cases its input: the upper-case marker in the answer is the tool's output.
    const problem = c === 'tool' ? answerProblem(c, marker.toUpperCase(), text) : answerProblem(c, marker, text);
    return problem ? { ok: false, reason: problem, usage } : { ok: true, reason: '', usage };
  },
};

export const DRIVERS: Record<ClientName, Driver> = { 'claude-code': claudeCode, codex, llm };
