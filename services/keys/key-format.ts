import { createHash, randomBytes } from 'node:crypto';

export type KeyFormat = 'gw_ai' | 'rk_live' | 'mt';

const PREFIX: Record<KeyFormat, string> = { gw_ai: 'gw_ai_', rk_live: 'rk_live_', mt: 'mt-' };

/** A new random key. `mt-` keys are 43 characters of base64url (spec 3 A 2). */
export function generateKey(format: KeyFormat): string {
  const body = randomBytes(32).toString('base64url'); // 43 characters
  return PREFIX[format] + body;
}

/** Keys are stored only as this hash. */
export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export const keyPrefix = (key: string) => key.slice(0, 12);

export function keyFormatOf(key: string): KeyFormat | null {
  if (key.startsWith('gw_ai_')) return 'gw_ai';
  if (key.startsWith('rk_live_')) return 'rk_live';
  if (/^mt-[A-Za-z0-9_-]{43}$/.test(key)) return 'mt';
  return null;
}
