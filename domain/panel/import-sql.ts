// SQL dumps of a legacy import (spec 2 section 4.4.4): a streaming statement splitter that respects
// quotes, comments and the client's DELIMITER command, and a checker that allows only DDL/DML on the
// imported database. What is loaded is the checked text itself (comments dropped, MySQL/MariaDB
// executable comments unwrapped), so nothing the server would run escapes the check. Pure.

export interface SqlStatement {
  /** the statement as written, without its delimiter */
  text: string;
  /** line of the dump where it starts (1-based) */
  line: number;
  /** a client command line (`\!`, `source`, …): never sent to a server */
  client?: boolean;
}

/** The first line of newer MariaDB dumps: a client command (sandbox mode), not SQL. */
export const SANDBOX_LINE = '/*M!999999\\- enable the sandbox mode */';

/** Longest statement accepted (mysqldump's extended INSERTs stay below max_allowed_packet, 16 MB by default). */
export const MAX_STATEMENT_CHARS = 64 * 1024 * 1024;

export class StatementTooLong extends Error {}

type State = 'code' | 'sq' | 'dq' | 'bt' | 'line' | 'block';

const CLIENT_COMMAND = /^(\\|(system|source|connect|charset|warnings|nowarning|tee|notee|pager|nopager|rehash|prompt|exit|quit|go|ego|print|status)\b)/i;

/** Splits a dump fed in chunks into statements; at most one statement is held in memory. */
export class SqlSplitter {
  private buf = '';
  private rest = '';
  private state: State = 'code';
  private delimiter = ';';
  private line = 1;
  private startLine = 1;
  private hasCode = false;

  constructor(private readonly maxChars = MAX_STATEMENT_CHARS) {}

  push(chunk: string): SqlStatement[] {
    this.rest += chunk;
    return this.scan(false);
  }

  end(): SqlStatement[] {
    const out = this.scan(true);
    if (this.buf.trim()) out.push({ text: this.buf.trim(), line: this.startLine });
    this.buf = '';
    return out;
  }

  private scan(final: boolean): SqlStatement[] {
    const out: SqlStatement[] = [];
    const s = this.rest;
    // keep a short tail unscanned so a two-character token or delimiter is never split between chunks
    const limit = final ? s.length : s.length - Math.max(3, this.delimiter.length + 1);
    let i = 0;
    let from = 0;
    const emit = (end: number, skip: number, client = false) => {
      const text = (this.buf + s.slice(from, end)).trim();
      if (text) out.push({ text, line: this.startLine, client });
      this.buf = '';
      i = end + skip;
      from = i;
      this.hasCode = false;
    };
    scanning: while (i < limit) {
      const c = s[i];
      if (c === '\n') this.line++;
      switch (this.state) {
        case 'code': {
          if (!this.hasCode && !/\s/.test(c)) {
            if (!final && s.length - i < 12) break scanning;
            const head = s.slice(i, i + 12);
            if (/^delimiter\s/i.test(head) || CLIENT_COMMAND.test(head)) {
              const nl = s.indexOf('\n', i);
              if (nl < 0 && !final) {
                this.buf += s.slice(from, i);
                this.rest = s.slice(i);
                return out;
              }
              const end = nl < 0 ? s.length : nl;
              const command = s.slice(i, end).trim();
              if (/^delimiter\s/i.test(command)) {
                this.delimiter = command.slice(9).trim() || ';';
                this.buf = '';
                from = i = end;
              } else {
                from = i;
                emit(end, 0, true);
              }
              continue;
            }
          }
          if (s.startsWith(this.delimiter, i)) {
            emit(i, this.delimiter.length);
            continue;
          }
          if (c === '#' || (c === '-' && s[i + 1] === '-' && /\s/.test(s[i + 2] ?? ' '))) this.state = 'line';
          else if (c === '/' && s[i + 1] === '*') {
            // an executable comment (`/*!40101 SET …*/`) is code to the server
            if (!this.hasCode && (s[i + 2] === '!' || s.startsWith('M!', i + 2))) {
              this.startLine = this.line;
              this.hasCode = true;
            }
            this.state = 'block';
            i += 2;
            continue;
          } else if (!/\s/.test(c)) {
            if (!this.hasCode) this.startLine = this.line;
            this.hasCode = true;
            if (c === "'") this.state = 'sq';
            else if (c === '"') this.state = 'dq';
            else if (c === '`') this.state = 'bt';
          }
          break;
        }
        case 'sq':
        case 'dq': {
          const q = this.state === 'sq' ? "'" : '"';
          if (c === '\\') {
            if (s[i + 1] === '\n') this.line++;
            i += 2;
            continue;
          }
          if (c === q) {
            if (s[i + 1] === q) {
              i += 2;
              continue;
            }
            this.state = 'code';
          }
          break;
        }
        case 'bt':
          if (c === '`') {
            if (s[i + 1] === '`') {
              i += 2;
              continue;
            }
            this.state = 'code';
          }
          break;
        case 'line':
          if (c === '\n') this.state = 'code';
          break;
        case 'block':
          if (c === '*' && s[i + 1] === '/') {
            this.state = 'code';
            i += 2;
            continue;
          }
          break;
      }
      i++;
    }
    this.buf += s.slice(from, i);
    this.rest = s.slice(i);
    if (this.buf.length > this.maxChars) throw new StatementTooLong(`a statement starting on line ${this.startLine} is longer than ${this.maxChars} characters`);
    return out;
  }
}

// ---- the checker ------------------------------------------------------------------------------

interface Token {
  t: 'word' | 'ident' | 'str' | 'num' | 'var' | 'punct' | 'ws';
  v: string;
}

/** MySQL/MariaDB version (5 or 6 digits as in executable comments) of the nodes' MariaDB: newer gated parts are not run. */
export const SERVER_VERSION = 101199;

/** Tokens of `text` with ordinary comments removed and executable comments (`/*!40101 … *\/`, `/*M!100616 … *\/`) unwrapped. */
export function tokenize(text: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const rest = text.slice(i, i + 3);
    if (/\s/.test(c)) {
      const m = /^\s+/.exec(text.slice(i, i + 4096))![0];
      out.push({ t: 'ws', v: ' ' });
      i += m.length;
    } else if (c === '#' || (rest.startsWith('--') && /\s/.test(text[i + 2] ?? ' '))) {
      const nl = text.indexOf('\n', i);
      i = nl < 0 ? text.length : nl + 1;
      out.push({ t: 'ws', v: ' ' });
    } else if (rest.startsWith('/*')) {
      const close = text.indexOf('*/', i + 2);
      const body = text.slice(i + 2, close < 0 ? text.length : close);
      i = close < 0 ? text.length : close + 2;
      const exec = /^(M?)!(\d{5,6})?/.exec(body);
      if (exec && (exec[2] === undefined || Number(exec[2]) <= SERVER_VERSION)) out.push(...tokenize(body.slice(exec[0].length)));
      out.push({ t: 'ws', v: ' ' });
    } else if (c === "'" || c === '"' || c === '`') {
      let j = i + 1;
      for (; j < text.length; j++) {
        if (text[j] === '\\' && c !== '`') j++;
        else if (text[j] === c) {
          if (text[j + 1] === c) j++;
          else break;
        }
      }
      out.push({ t: c === '`' ? 'ident' : 'str', v: text.slice(i, j + 1) });
      i = j + 1;
    } else if (c === '@') {
      const m = /^@@?[\w$.]*|^@`[^`]*`/.exec(text.slice(i, i + 256))![0];
      out.push({ t: 'var', v: m });
      i += m.length;
    } else if (/\d/.test(c) || (c === '.' && /\d/.test(text[i + 1] ?? ''))) {
      const m = /^(0x[0-9a-f]+|\d*\.?\d+(e[+-]?\d+)?)/i.exec(text.slice(i, i + 256))![0] || c;
      out.push({ t: 'num', v: m });
      i += m.length;
    } else if (/[\w$\u0080-\uffff]/.test(c)) {
      const m = /^[\w$\u0080-\uffff]+/.exec(text.slice(i, i + 256))![0];
      out.push({ t: 'word', v: m });
      i += m.length;
    } else {
      out.push({ t: 'punct', v: c });
      i++;
    }
  }
  return out;
}

export type Verdict = { action: 'run'; sql: string } | { action: 'skip'; why: string } | { action: 'refuse'; why: string };

const identName = (t: Token) => (t.t === 'ident' ? t.v.slice(1, -1).replace(/``/g, '`') : t.v).toLowerCase();
const isName = (t: Token | undefined) => !!t && (t.t === 'ident' || t.t === 'word');

const RUN_FIRST = new Set(['insert', 'replace', 'update', 'delete', 'select', 'with', 'truncate', 'lock', 'unlock', 'start', 'begin', 'commit', 'rollback', 'savepoint', 'release']);
const OBJECTS = new Set(['table', 'view', 'index', 'trigger', 'sequence']);
const CREATE_MODIFIERS = new Set(['or', 'replace', 'temporary', 'unique', 'fulltext', 'spatial', 'online', 'offline', 'algorithm', 'sql', 'security', 'invoker', 'merge', 'temptable', 'undefined', 'if', 'not', 'exists', '=']);
const SET_FORBIDDEN = new Set(['global', 'password', 'role', 'persist', 'persist_only', 'sql_log_bin', 'default']);

/** Whether `statement` (from the dump of database `database`) may be loaded into the imported database, and the text to load. */
export function checkStatement(statement: SqlStatement, database: string): Verdict {
  if (statement.client) return { action: 'refuse', why: `client command "${statement.text.slice(0, 40)}" on line ${statement.line}` };
  const all = tokenize(statement.text);
  const tokens = all.filter((t) => t.t !== 'ws');
  if (!tokens.length) return { action: 'skip', why: 'only comments' };
  const words = tokens.map((t) => (t.t === 'word' ? t.v.toLowerCase() : t.t === 'punct' ? t.v : ''));
  const at = `line ${statement.line}`;
  const refuse = (why: string): Verdict => ({ action: 'refuse', why: `${why} (${at})` });
  for (let k = 0; k < words.length; k++) {
    const [w, next] = [words[k], words[k + 1]];
    if (w === 'definer') return refuse('a DEFINER clause');
    if (w === 'into' && (next === 'outfile' || next === 'dumpfile')) return refuse(`INTO ${next.toUpperCase()}`);
    if (w === 'load' && (next === 'data' || next === 'xml')) return refuse(`LOAD ${next.toUpperCase()}`);
    if (w === 'load_file') return refuse('LOAD_FILE()');
  }
  // a qualifier that is neither a table nor an alias of this statement names another database
  const plain = new Set<string>();
  tokens.forEach((t, k) => {
    if (isName(t) && tokens[k - 1]?.v !== '.' && tokens[k + 1]?.v !== '.') plain.add(identName(t));
  });
  for (let k = 0; k + 2 < tokens.length; k++) {
    if (!isName(tokens[k]) || tokens[k + 1].v !== '.' || !isName(tokens[k + 2]) || tokens[k - 1]?.v === '.') continue;
    const q = identName(tokens[k]);
    if (tokens[k + 3]?.v === '.' || !(plain.has(q) || q === 'new' || q === 'old')) return refuse(`the cross-database name ${tokens[k].v}.${tokens[k + 2].v}`);
  }
  const first = words[0];
  const second = words.slice(1).find((w) => w && !CREATE_MODIFIERS.has(w)) ?? '';
  const objectName = () => {
    const k = tokens.findIndex((t, j) => j > 0 && (t.t === 'ident' || (t.t === 'word' && !CREATE_MODIFIERS.has(t.v.toLowerCase()) && !['database', 'schema'].includes(t.v.toLowerCase()))));
    return k < 0 ? '' : identName(tokens[k]);
  };
  const sql = all.map((t) => t.v).join('').trim();
  const run: Verdict = { action: 'run', sql };
  if (RUN_FIRST.has(first)) return run;
  switch (first) {
    case 'set':
      return words.some((w) => SET_FORBIDDEN.has(w)) || tokens.some((t) => t.t === 'var' && /^@@global\./i.test(t.v)) ? refuse('SET of a global variable, password or role') : run;
    case 'create':
    case 'alter':
    case 'drop':
      if (OBJECTS.has(second) && !(first === 'alter' && second === 'index')) return run;
      if (second === 'database' || second === 'schema') {
        if (objectName() === database.toLowerCase() && first !== 'alter') return { action: 'skip', why: `${first.toUpperCase()} DATABASE of the dump's own database: the panel creates the database` };
        return refuse(`${first.toUpperCase()} DATABASE ${objectName()}`);
      }
      if (['procedure', 'function', 'event'].includes(second)) return refuse(`stored ${second}s are not imported (they run with another account's rights)`);
      return refuse(`${first.toUpperCase()} ${second.toUpperCase()}`);
    case 'rename':
      return second === 'table' ? run : refuse(`RENAME ${second.toUpperCase()}`);
    case 'use':
      return objectName() === database.toLowerCase() ? { action: 'skip', why: "USE of the dump's own database" } : refuse(`USE of another database (${objectName()})`);
    default:
      return refuse(`${(tokens[0].v || '?').toUpperCase()} is not allowed (only DDL and DML on the imported database)`);
  }
}
