import { parseArgs } from 'node:util';

// The one argument parser of every command-line tool (admin, testrun, panelctl, panel-controller,
// panel-api serve, panel-host serve): node's parseArgs, with flags spelled `-name` (spec 2's tools)
// or `--name`, `=value` or the next word; a mistake is a UsageError that names the flag as the
// tool spells it. Each tool maps UsageError to its own documented exit code (2, or 4 for testrun).

export class UsageError extends Error {}

export type FlagOptions = Record<string, { type: 'string' | 'boolean' }>;

export type FlagValues<O extends FlagOptions> = { [K in keyof O]?: O[K]['type'] extends 'boolean' ? boolean : string };

export interface ParseFlags {
  /** how the tool spells its flags in messages */
  dash: '-' | '--';
  /** words without a dash are kept (else each is an unexpected argument) */
  positionals?: boolean;
}

const OPTION = /^--?([a-z][a-z0-9-]*)(=[\s\S]*)?$/i;

/**
 * Flags by name (a repeated flag: the last one wins) and the positional words. A string flag
 * takes the next word as is, even one starting with a dash; a switch is true when present, or
 * says `=true` / `=false`.
 */
export function parseFlags<O extends FlagOptions>(argv: readonly string[], options: O, how: ParseFlags): { values: FlagValues<O>; positionals: string[] } {
  const flag = (name: string) => `${how.dash}${name}`;
  // parseArgs reads `--name` only: one dash becomes two, values are passed through untouched.
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--') {
      args.push(...argv.slice(i));
      break;
    }
    const m = OPTION.exec(argv[i]);
    if (!m) {
      args.push(argv[i]);
      continue;
    }
    args.push(`--${m[1]}${m[2] ?? ''}`);
    if (m[2] === undefined && Object.hasOwn(options, m[1]) && options[m[1]].type === 'string' && i + 1 < argv.length) args.push(argv[++i]);
  }
  // Not strict: the checks below give messages in the tool's own spelling.
  const { tokens } = parseArgs({ args, options, strict: false, allowPositionals: true, tokens: true });
  const values: Record<string, string | boolean> = {};
  const positionals: string[] = [];
  for (const t of tokens) {
    if (t.kind === 'option-terminator') continue;
    if (t.kind === 'positional') {
      if (!how.positionals) throw new UsageError(`unexpected argument "${t.value}"`);
      positionals.push(t.value);
      continue;
    }
    const spec = Object.hasOwn(options, t.name) ? options[t.name] : undefined;
    if (!spec) throw new UsageError(`unknown flag ${flag(t.name)} (known: ${Object.keys(options).map(flag).join(', ')})`);
    if (spec.type === 'string') {
      if (t.value === undefined) throw new UsageError(`${flag(t.name)} needs a value`);
      values[t.name] = t.value;
    } else {
      if (t.value !== undefined && t.value !== 'true' && t.value !== 'false') throw new UsageError(`${flag(t.name)} takes no value (or =true / =false)`);
      values[t.name] = t.value !== 'false';
    }
  }
  return { values: values as FlagValues<O>, positionals };
}

/** Options of string flags only, from their names. */
export const stringFlags = <N extends string>(names: readonly N[]) => Object.fromEntries(names.map((n) => [n, { type: 'string' as const }])) as Record<N, { type: 'string' }>;
