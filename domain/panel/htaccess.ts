import { PHP_VALUES, type PhpValueName, type PhpValues } from './php-values';

// Apache habits on nginx (issue 34 part 3): what an imported site's `.htaccess` asked of Apache.
// nginx never reads the file, so every directive is either carried into the panel (php_value and
// php_flag lines within the operator's bounds, from the document root's own file only: Apache
// applies a subfolder's file to that folder, a site's PHP values apply to the whole site) or
// reported with what it no longer does. Nothing is dropped silently. Pure.

export interface HtaccessIgnored {
  /** a group of directives that share a consequence, e.g. "rewrite rules" */
  what: string;
  /** the directives of the file in that group, in order of appearance, with their counts */
  directives: string[];
  why: string;
}

export interface HtaccessAnalysis {
  /** PHP values the website takes over */
  php: PhpValues;
  /** `name value` of each carried line, for the report */
  carried: string[];
  ignored: HtaccessIgnored[];
}

const GROUPS: Array<{ what: string; why: string; names: string[] }> = [
  { what: 'rewrite rules', why: 'nginx does not read .htaccess: the site needs the rules as nginx configuration', names: ['rewriteengine', 'rewriterule', 'rewritecond', 'rewritebase', 'rewriteoptions', 'rewritemap'] },
  { what: 'access rules', why: 'have no effect: the paths they restricted are served to anyone', names: ['order', 'allow', 'deny', 'require', 'satisfy', 'limit', 'limitexcept'] },
  { what: 'password protection', why: 'has no effect: the paths it protected are public', names: ['authtype', 'authname', 'authuserfile', 'authgroupfile', 'authbasicprovider'] },
  { what: 'redirects', why: 'have no effect', names: ['redirect', 'redirectmatch', 'redirectpermanent', 'redirecttemp'] },
  { what: 'error pages', why: 'have no effect: nginx serves its own', names: ['errordocument'] },
  { what: 'headers and caching', why: 'have no effect', names: ['header', 'requestheader', 'expiresactive', 'expiresbytype', 'expiresdefault', 'fileetag', 'addoutputfilterbytype', 'setoutputfilter'] },
];
const PHP_DIRECTIVES = new Set(['php_value', 'php_flag', 'php_admin_value', 'php_admin_flag']);
/** Section tags that only wrap other lines: their lines are judged one by one. */
const WRAPPERS = new Set(['ifmodule', 'ifdefine', 'ifversion', 'files', 'filesmatch', 'directory', 'directorymatch', 'location', 'locationmatch', 'if', 'else', 'elseif']);

const UNIT_MB: Record<string, number> = { '': 1 / (1024 * 1024), K: 1 / 1024, M: 1, G: 1024 };

/** The whole number a php_value line sets for `name` in the table's unit, or why not. */
function phpNumber(name: PhpValueName, raw: string): number | string {
  const b = PHP_VALUES[name];
  const m = b.unit === 'MB' ? /^(\d+)([KMG]?)$/i.exec(raw) : /^(\d+)()$/.exec(raw);
  if (!m) return `"${raw}" is not a ${b.unit === 'MB' ? 'size' : 'whole number'}`;
  const v = b.unit === 'MB' ? Number(m[1]) * UNIT_MB[m[2].toUpperCase()] : Number(m[1]);
  if (!Number.isInteger(v) || v < b.min || v > b.max) return `${raw} is outside the operator's bounds (${b.min} to ${b.max} ${b.unit})`;
  return v;
}

/** What the `.htaccess` text asks and what becomes of it; `docrootFile`: the document root's own file. */
export function analyzeHtaccess(text: string, docrootFile: boolean): HtaccessAnalysis {
  const out: HtaccessAnalysis = { php: {}, carried: [], ignored: [] };
  const counts = new Map<string, Map<string, number>>(); // group → directive → lines
  const note = (group: string, directive: string) => {
    const g = counts.get(group) ?? new Map<string, number>();
    g.set(directive, (g.get(directive) ?? 0) + 1);
    counts.set(group, g);
  };
  const whys = new Map<string, string>();
  const other = (group: string, why: string, directive: string) => {
    whys.set(group, why);
    note(group, directive);
  };
  // continuation lines (a trailing backslash) form one directive
  for (const line of text.replace(/\\\r?\n/g, ' ').split(/\r?\n/)) {
    const t = line.trim();
    if (!t || t.startsWith('#')) continue;
    const tag = /^<\/?\s*([A-Za-z]+)/.exec(t);
    if (tag) {
      const name = tag[1].toLowerCase();
      if (WRAPPERS.has(name) || t.startsWith('</')) continue; // a closing tag was counted with its opening one
      const g = GROUPS.find((x) => x.names.includes(name));
      if (g) other(g.what, g.why, `<${tag[1]}>`);
      else other('other directives', 'have no effect on nginx', `<${tag[1]}>`);
      continue;
    }
    const [directive, ...args] = t.split(/\s+/);
    const name = directive.toLowerCase();
    if (PHP_DIRECTIVES.has(name)) {
      const key = args[0] ?? '';
      const value = (args.slice(1).join(' ') || '').replace(/^"(.*)"$/, '$1');
      const phpWhy = `are not carried (a site may set ${Object.keys(PHP_VALUES).join(', ')} with php_value, within the operator's bounds, in the document root's .htaccess)`;
      if (!Object.hasOwn(PHP_VALUES, key) || name.endsWith('_flag')) {
        other('PHP settings', phpWhy, `${directive} ${key}`);
        continue;
      }
      const n = phpNumber(key as PhpValueName, value);
      if (typeof n === 'string') other('PHP settings', phpWhy, `${directive} ${key}: ${n}`);
      else if (!docrootFile) other('PHP settings', phpWhy, `${directive} ${key} in a subfolder (Apache applies it to that folder only)`);
      else {
        out.php[key as PhpValueName] = n;
        out.carried.push(`${key} ${n} ${PHP_VALUES[key as PhpValueName].unit}`);
      }
      continue;
    }
    const g = GROUPS.find((x) => x.names.includes(name));
    if (g) other(g.what, g.why, directive);
    else other('other directives', 'have no effect on nginx', directive);
  }
  for (const [what, ds] of counts) {
    out.ignored.push({ what, why: whys.get(what)!, directives: [...ds].map(([d, n]) => (n > 1 ? `${d} ×${n}` : d)) });
  }
  return out;
}

/** The report's note for one file: what was carried, then each ignored group. */
export function htaccessNote(a: HtaccessAnalysis): string {
  const parts: string[] = [];
  if (a.carried.length) parts.push(`carried into the website's PHP values: ${a.carried.join(', ')}`);
  for (const i of a.ignored) parts.push(`${i.what} (${i.directives.join(', ')}) ${i.why}`);
  if (!parts.length) parts.push('nothing but comments');
  return `${parts.join('; ')}; the file is copied with the site, nginx does not read it`;
}
