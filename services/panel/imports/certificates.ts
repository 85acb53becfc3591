import { createPrivateKey, X509Certificate } from 'node:crypto';
import type { ImportLimits, ReportItem } from '../../../domain/panel/import-archive';
import { CERT_BLOCK, checkCertificatePair, dnsNames } from '../certificates/check';
import { collect, eachEntry } from './stream';

// The certificates of a legacy archive (`sslcerts/` + `sslkeys/`, or `apache_tls/<domain>` holding
// key and chain in one file): the dry run pairs each certificate with the key that matches it and
// the imported website it covers, and reports why one is not migrated (no matching key, expired, a
// weak key, covers no imported website …). The plan keeps archive paths only: the run reads the key
// from the kept archive copy and attaches it like `PUT /v1/sites/{id}/certificate`, never storing it
// in clear.

export interface CertificatePlan {
  /** the website (domain) it is attached to */
  site: string;
  /** archive paths (relative to its top folder) of the chain and of the key; the same file for apache_tls */
  certificate: string;
  key: string;
  fingerprint_sha256: string;
  not_after: string;
}

export interface TlsFile {
  rel: string;
  part: 'cert' | 'key' | 'tls';
  /** the name the archive files it under */
  name: string;
  text: string;
}

const KEY_BLOCK = /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----\n?/;

/** The chain and the key of a file or pair of files (apache_tls holds both in one). */
export function splitPem(certificateText: string, keyText: string): { certificate: string; key: string } {
  return { certificate: (certificateText.match(CERT_BLOCK) ?? []).join('\n'), key: keyText.match(KEY_BLOCK)?.[0] ?? '' };
}

const matches = (certificate: string, key: string): boolean => {
  try {
    return new X509Certificate(certificate).checkPrivateKey(createPrivateKey(key));
  } catch {
    return false;
  }
};

/** Pairs the archive's certificates with their keys and the websites they cover; one certificate per website, the longest valid wins. */
export function planCertificates(files: TlsFile[], websites: Array<{ domain: string; aliases: string[] }>, now = new Date()): { plan: CertificatePlan[]; items: ReportItem[] } {
  const items: ReportItem[] = [];
  const no = (name: string, note: string) => items.push({ kind: 'certificate', name, class: 'not_migrated', note });
  const keys = files.filter((f) => f.part === 'key');
  const usedKeys = new Set<string>();
  const candidates: CertificatePlan[] = [];
  const allNames = websites.flatMap((w) => [w.domain, ...w.aliases]);
  for (const f of files.filter((x) => x.part !== 'key')) {
    const { certificate } = splitPem(f.text, '');
    if (!certificate) {
      no(f.name, `${f.rel} holds no PEM certificate`);
      continue;
    }
    try {
      new X509Certificate(certificate);
    } catch (err) {
      no(f.name, `${f.rel} does not parse as a certificate: ${(err as Error).message}`);
      continue;
    }
    const key = f.part === 'tls' ? (matches(certificate, splitPem('', f.text).key) ? { rel: f.rel, pem: splitPem('', f.text).key } : null) : (keys.map((k) => ({ rel: k.rel, pem: splitPem('', k.text).key })).find((k) => matches(certificate, k.pem)) ?? null);
    if (!key) {
      no(f.name, f.part === 'tls' ? `${f.rel} holds no private key that matches its certificate` : `no private key in sslkeys/ matches it (${keys.length} key(s) there): a certificate without its key cannot be served`);
      continue;
    }
    usedKeys.add(key.rel);
    const site = websites.find((w) => checkCertificatePair(certificate, key.pem, [w.domain, ...w.aliases], now).ok);
    if (!site) {
      const r = checkCertificatePair(certificate, key.pem, allNames.length ? allNames : ['-'], now);
      const leaf = new X509Certificate(certificate);
      no(f.name, r.ok ? 'covers no imported website' : /covers none/.test(r.why) ? `covers no imported website (it is for ${dnsNames(leaf).join(', ') || leaf.subject.replace(/\n/g, ', ')})` : r.why);
      continue;
    }
    const leaf = new X509Certificate(certificate);
    candidates.push({ site: site.domain, certificate: f.rel, key: key.rel, fingerprint_sha256: leaf.fingerprint256, not_after: new Date(leaf.validTo).toISOString() });
  }
  const plan: CertificatePlan[] = [];
  for (const c of [...candidates].sort((a, b) => b.not_after.localeCompare(a.not_after))) {
    const name = files.find((f) => f.rel === c.certificate)!.name;
    if (plan.some((p) => p.site === c.site)) {
      no(name, `another certificate of the archive for ${c.site} is valid longer and is the one attached`);
      continue;
    }
    plan.push(c);
    items.push({ kind: 'certificate', name, class: 'migrated', note: `attached to the website ${c.site} (served over HTTPS where its node has a TLS port); valid until ${c.not_after}; its key is kept sealed` });
  }
  for (const k of keys) if (!usedKeys.has(k.rel)) items.push({ kind: 'tls_key', name: k.name, class: 'not_migrated', note: 'no certificate in the archive matches this private key' });
  return { plan, items };
}

/** The chain and key of a planned certificate, read again from the kept archive copy (small files only). */
export async function readCertificate(archive: string, c: CertificatePlan, limits: ImportLimits): Promise<{ certificate: string; key: string }> {
  const texts = new Map<string, string>();
  await eachEntry(archive, limits, async (rel, entry, body) => {
    if ((rel !== c.certificate && rel !== c.key) || (entry.size ?? 0) > 1024 * 1024) return false;
    texts.set(rel, await collect(body));
    return true;
  });
  if (!texts.has(c.certificate) || !texts.has(c.key)) throw new Error(`the archive copy no longer holds ${c.certificate} and ${c.key}`);
  return splitPem(texts.get(c.certificate)!, texts.get(c.key)!);
}
