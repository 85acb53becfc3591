import { Cron } from 'croner';

// Site cron lines as crontab(5) defines them: five time fields (numbers, ranges, steps, lists, and
// month and weekday names) or one of the @ nicknames, then a command in which an unescaped `%` starts
// the command's standard input. Parsing is strict here (no L, W, # or ? of other cron dialects) and
// scheduling is croner's, with day-of-month and day-of-week ORed as in Vixie cron when both are set.

const NUM = '\\d{1,2}';
const MONTHS = 'jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec';
const DAYS = 'sun|mon|tue|wed|thu|fri|sat';
/** one field: a list of `*`, a value or a range, each with an optional step after `*` or a range */
const field = (value: string) => {
  const item = `(?:\\*(?:/\\d{1,2})?|(?:${value})-(?:${value})(?:/\\d{1,2})?|${value})`;
  return new RegExp(`^${item}(?:,${item})*$`, 'i');
};
const FIELDS = [field(NUM), field(NUM), field(NUM), field(`${NUM}|${MONTHS}`), field(`${NUM}|${DAYS}`)];
const NAMES = ['minute', 'hour', 'day of month', 'month', 'day of week'];
const NICKNAMES = new Set(['@reboot', '@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly']);

export interface CronLine {
  /** the five time fields joined by one space, or a nickname (`@reboot`: once when the node starts) */
  when: string;
  /** what /bin/sh -c runs: the command up to its first unescaped `%`, with `\%` made `%` */
  command: string;
  /** the rest, each further `%` a newline; null: nothing (the command's stdin is empty) */
  stdin: string | null;
}

/** A cron line parsed, or why it is not one (a sentence naming the field). */
export function parseCronLine(raw: string): CronLine | string {
  if (typeof raw !== 'string') return 'a cron line is a string';
  if (raw.length > 1000) return 'at most 1000 characters';
  if (/\p{Cc}/u.test(raw.replace(/\t/g, ' '))) return 'one line, without control characters';
  const line = raw.trim();
  let when: string;
  let rest: string;
  if (line.startsWith('@')) {
    const m = /^(@\S+)\s+(\S.*)$/.exec(line);
    if (!m || !NICKNAMES.has(m[1].toLowerCase())) return `"${line.split(/\s/)[0]}" is not one of ${[...NICKNAMES].join(', ')}, or a command is missing`;
    [when, rest] = [m[1].toLowerCase(), m[2]];
  } else {
    const m = /^((?:\S+\s+){5})(\S.*)$/.exec(line);
    if (!m) return 'five time fields (minute hour day-of-month month day-of-week) and a command';
    const f = m[1].trim().split(/\s+/);
    for (let i = 0; i < 5; i++) if (!FIELDS[i].test(f[i])) return `${NAMES[i]}: "${f[i]}" is not a crontab(5) field (numbers, names, ranges a-b, steps */n or a-b/n, lists a,b)`;
    [when, rest] = [f.join(' '), m[2]];
  }
  if (when !== '@reboot') {
    try {
      // croner checks the ranges (minute 0-59, …) and that a range runs upwards
      new Cron(when, { paused: true, mode: '5-part' });
    } catch (err) {
      return (err as Error).message.replace(/^CronPattern: /, '');
    }
  }
  // `%` (unless escaped) ends the command; what follows is its standard input, `%` as newlines
  const parts = rest.split(/(?<!\\)%/).map((p) => p.replace(/\\%/g, '%'));
  const command = parts[0].trim();
  if (!command) return 'the command is empty';
  return { when, command, stdin: parts.length > 1 ? `${parts.slice(1).join('\n')}\n` : null };
}

export const isSiteCronLine = (s: string): boolean => typeof parseCronLine(s) !== 'string';

/** A schedule that says whether a minute is due; `@reboot` is never due (the node runs it once at start). */
export function cronSchedule(when: string): (minute: Date) => boolean {
  if (when === '@reboot') return () => false;
  const c = new Cron(when, { paused: true, mode: '5-part', domAndDow: false });
  return (minute) => c.match(minute);
}

/** One run of a site's cron line on its node, as the node reports it and the panel shows it. */
export interface CronRun {
  /** unique on its node */
  id: string;
  siteId: string;
  line: string;
  startedAt: string;
  finishedAt: string | null;
  /** `skipped`: the previous run of the same line was still running; `timeout`: killed at the run time limit */
  status: 'running' | 'ok' | 'failed' | 'timeout' | 'skipped';
  exitCode: number | null;
  /** the last bytes of stdout and stderr together */
  output: string;
  /** the system user it ran as */
  user: string;
}
