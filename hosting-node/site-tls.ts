import { createPrivateKey, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import { tlsPaths } from '../domain/panel/node-config';
import type { SiteSpec } from '../domain/panel/node-ops';
import { readIfExists, writeFileAtomic } from './files';

// A site's certificate files on its node (<root>/etc/ssl/<domain>/fullchain.pem and privkey.pem,
// the key 0600): written before nginx tests the vhost that names them, put back if the test fails.
// The key arrives only with the operation that attaches the certificate; later applies of the site
// keep the key file on disk, checked to still match the certificate they carry.

/** The key file's text: the one sent, else the one on disk if it matches the certificate; null: none that matches. */
function keyFor(tls: NonNullable<SiteSpec['tls']>, onDisk: string | null): string | null {
  const key = tls.key ?? onDisk;
  if (key === null) return null;
  try {
    return new X509Certificate(tls.certificate).checkPrivateKey(createPrivateKey(key)) ? key : null;
  } catch {
    return null;
  }
}

/**
 * Writes the certificate and key `s` needs (nothing when it has none) and returns how to put the
 * files back as they were; throws `refuse(message)` when the node has no key matching the certificate.
 */
export function writeSiteTls(root: string, s: SiteSpec, refuse: (message: string) => Error): () => void {
  if (!s.tls) return () => {};
  const t = tlsPaths(root, s.domain);
  const before = { certificate: readIfExists(t.certificate), key: readIfExists(t.key) };
  const key = keyFor(s.tls, before.key);
  if (key === null) {
    throw refuse(s.tls.key ? 'the private key does not match the certificate' : 'the private key of this certificate is not on this node: attach the certificate again');
  }
  fs.mkdirSync(t.dir, { recursive: true, mode: 0o700 });
  if (before.certificate !== s.tls.certificate) writeFileAtomic(t.certificate, s.tls.certificate, 0o644);
  if (before.key !== key) writeFileAtomic(t.key, key, 0o600);
  return () => {
    for (const [file, text, mode] of [[t.certificate, before.certificate, 0o644], [t.key, before.key, 0o600]] as const) {
      if (text === null) fs.rmSync(file, { force: true });
      else writeFileAtomic(file, text, mode);
    }
  };
}

/** Removes a domain's certificate files (the site has none any more, or is gone). */
export const removeSiteTls = (root: string, domain: string): void => fs.rmSync(tlsPaths(root, domain).dir, { recursive: true, force: true });

/** The spec as the node keeps it (state/sites.json, restore points): never the private key. */
export const withoutKey = (s: SiteSpec): SiteSpec => (s.tls?.key === undefined ? s : { ...s, tls: { certificate: s.tls.certificate } });
