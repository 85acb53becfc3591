// Per-site PHP values a site's owner may set (issue 32 item 7), each within the operator's bounds:
// the one table the API checks, the node validates and the pool renders (as php_admin_value, so
// ini_set() in the site cannot go past a bound). Pure.

export const PHP_VALUES = {
  memory_limit: { unit: 'MB', min: 16, max: 1024, suffix: 'M' },
  upload_max_filesize: { unit: 'MB', min: 1, max: 1024, suffix: 'M' },
  post_max_size: { unit: 'MB', min: 1, max: 1024, suffix: 'M' },
  max_execution_time: { unit: 'seconds', min: 1, max: 3600, suffix: '' },
  max_input_time: { unit: 'seconds', min: 1, max: 3600, suffix: '' },
  max_input_vars: { unit: 'variables', min: 100, max: 100_000, suffix: '' },
} as const;

export type PhpValueName = keyof typeof PHP_VALUES;
export type PhpValues = Partial<Record<PhpValueName, number>>;

/** Why `values` are not acceptable, as [field, reason], or null. */
export function phpValuesProblem(values: unknown): [string, string] | null {
  if (typeof values !== 'object' || values === null || Array.isArray(values)) return ['php_values', 'an object of PHP values'];
  for (const [name, v] of Object.entries(values)) {
    const b = PHP_VALUES[name as PhpValueName];
    if (!b) return [`php_values.${name}`, `not a PHP value a site may set (${Object.keys(PHP_VALUES).join(', ')})`];
    if (!Number.isInteger(v) || v < b.min || v > b.max) return [`php_values.${name}`, `a whole number of ${b.unit} from ${b.min} to ${b.max} (the operator's bounds)`];
  }
  return null;
}

/** The pool lines of the values, in the table's order. */
export const phpValueLines = (values: PhpValues | undefined) =>
  (Object.keys(PHP_VALUES) as PhpValueName[]).filter((n) => values?.[n] !== undefined).map((n) => `php_admin_value[${n}] = ${values![n]}${PHP_VALUES[n].suffix}\n`).join('');
