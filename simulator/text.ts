// Text helpers shared by the request parsers of every wire format. Pure functions.

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Concatenated `text` of the parts that have one; other parts (images etc.) count zero. */
export function partsText(parts: readonly unknown[]): string {
  let out = '';
  for (const part of parts) {
    if (isRecord(part) && typeof part.text === 'string') out += part.text;
  }
  return out;
}

/** Up to `max` whitespace-separated words of the text. */
export function firstWords(text: string, max: number): string[] {
  const words: string[] = [];
  const re = /\S+/g;
  let match: RegExpExecArray | null;
  while (words.length < max && (match = re.exec(text)) !== null) words.push(match[0]);
  return words;
}

/** `count` entries taken from `base` round-robin (`base` must not be empty). */
export function cycle(base: readonly string[], count: number): string[] {
  const out = new Array<string>(count);
  for (let i = 0; i < count; i++) out[i] = base[i % base.length] ?? '';
  return out;
}

/** The text without `[sim ...]` directives, whitespace collapsed to single spaces. */
export function stripDirectives(text: string): string {
  return text
    .replace(/\[sim(?:\s+[^\]]*)?\]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The text after the last `[sim ...]` directive; all of it when there is none. */
export function afterLastDirective(text: string): string {
  let end = 0;
  for (const match of text.matchAll(/\[sim(?:\s+[^\]]*)?\]/g)) end = match.index + match[0].length;
  return text.slice(end);
}

/** Optional-number check for sampling parameters: absent/null, or a number in [min, max]. */
export function numberIn(value: unknown, min: number, max: number): boolean {
  return value === undefined || value === null || (typeof value === 'number' && Number.isFinite(value) && value >= min && value <= max);
}

/** Absent/null, or a positive integer. */
export function optionalPositiveInt(value: unknown): boolean {
  return value === undefined || value === null || (typeof value === 'number' && Number.isInteger(value) && value >= 1);
}
