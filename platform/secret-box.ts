import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from './config';

// Secrets kept server-side (the gateway key of a test-run project, a panel login's TOTP secret)
// are stored sealed with AES-256-GCM under a key derived from TESTRUN_SECRET (PANEL_SECRET). Without TESTRUN_SECRET (development),
// a random secret is created once in DATA_DIR/testrun-secret (mode 600) and reused by the admin
// CLI and `npm start`; production sets TESTRUN_SECRET on the workers and wherever the admin
// CLI runs. Losing the secret only means re-creating the projects' keys (`project update`).

/** The 32-byte sealing key of a purpose: SHA-256 of its secret variable, or of its DATA_DIR secret file. */
export function loadSealingKey(e: NodeJS.ProcessEnv = process.env, purpose: 'testrun' | 'panel' = 'testrun'): Buffer {
  const c = loadConfig(e);
  const secret = purpose === 'panel' ? c.PANEL_SECRET : c.TESTRUN_SECRET;
  if (secret) return deriveKey(secret);
  const file = path.join(c.dataDir, `${purpose}-secret`);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  try {
    fs.writeFileSync(file, randomBytes(32).toString('base64url') + '\n', { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  return deriveKey(fs.readFileSync(file, 'utf8').trim());
}

export const deriveKey = (secret: string): Buffer => createHash('sha256').update(secret).digest();

/** `v1.<iv>.<tag>.<ciphertext>`, base64url. */
export function seal(key: Buffer, plaintext: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  const ct = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
  return ['v1', iv.toString('base64url'), c.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
}

export function open(key: Buffer, sealed: string): string {
  const [v, iv, tag, ct] = sealed.split('.');
  if (v !== 'v1' || !iv || !tag || ct === undefined) throw new Error('not a sealed secret');
  const d = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  d.setAuthTag(Buffer.from(tag, 'base64url'));
  try {
    return Buffer.concat([d.update(Buffer.from(ct, 'base64url')), d.final()]).toString('utf8');
  } catch {
    throw new Error('the sealed secret does not open with this key (TESTRUN_SECRET / PANEL_SECRET)');
  }
}
