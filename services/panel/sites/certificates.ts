import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { invalid, notFound } from '../../../domain/panel/errors';
import type { Db } from '../../../platform/db';
import { seal } from '../../../platform/secret-box';
import type { Actor } from '../shared/actor';
import { changeSite, siteInScope, specOf, type SiteRow, type SitesDeps } from './sites';

// TLS certificates attached to websites (PANEL.md section 2: the vhost has TLS when a certificate is
// attached). A certificate is checked before anything changes: it parses, its key matches, it covers
// the site's domain or an alias (RFC 6125 wildcards: one left-most label), it is valid now, and its
// key is RSA of at least 2048 bits or EC. The chain is stored re-encoded, the key sealed with the
// panel's sealing key; the key leaves the panel only inside the site.apply operation that attaches
// it (stripped from the operation's row once finished) and is never returned by the API.

export type CertificateDeps = SitesDeps & { sealingKey: Buffer };

export interface CertificateInput {
  /** PEM: the site's certificate first, then intermediates */
  certificate: string;
  /** PEM, unencrypted (PKCS#1, SEC1 or PKCS#8) */
  private_key: string;
}

const CERT_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;
const MAX_CHAIN = 10;

/** The site's names a certificate covers (RFC 6125: a wildcard stands for exactly one whole left-most label). */
const coveredNames = (leaf: X509Certificate, names: string[]) =>
  names.filter((n) => leaf.checkHost(n, { wildcards: true, partialWildcards: false, multiLabelWildcards: false, singleLabelSubdomains: false }) !== undefined);

const dnsNames = (leaf: X509Certificate) =>
  (leaf.subjectAltName ?? '')
    .split(/,\s*/)
    .filter((s) => s.startsWith('DNS:'))
    .map((s) => s.slice(4));

function keyDescription(key: KeyObject): { type: string; bits?: number; curve?: string } {
  const d = key.asymmetricKeyDetails ?? {};
  return { type: key.asymmetricKeyType ?? 'unknown', ...(d.modulusLength ? { bits: d.modulusLength } : {}), ...(d.namedCurve ? { curve: d.namedCurve } : {}) };
}

export type PairCheck = { ok: true; certificate: string; key: string; covers: string[]; leaf: X509Certificate } | { ok: false; field: 'certificate' | 'private_key'; why: string };

/** Checks a certificate chain and its key for a site named `names` (domain first) at `now`; re-encodes both when they pass. */
export function checkCertificatePair(certificatePem: string, keyPem: string, names: string[], now = new Date()): PairCheck {
  const no = (field: 'certificate' | 'private_key', why: string): PairCheck => ({ ok: false, field, why });
  if (/PRIVATE KEY-----/.test(certificatePem)) return no('certificate', 'holds a private key: send it as private_key');
  const blocks = certificatePem.match(CERT_BLOCK) ?? [];
  if (!blocks.length) return no('certificate', 'no PEM certificate (-----BEGIN CERTIFICATE-----) found');
  if (blocks.length > MAX_CHAIN) return no('certificate', `a chain of at most ${MAX_CHAIN} certificates`);
  let chain: X509Certificate[];
  try {
    chain = blocks.map((b) => new X509Certificate(b));
  } catch (err) {
    return no('certificate', `does not parse: ${(err as Error).message}`);
  }
  for (let i = 0; i + 1 < chain.length; i++) {
    if (!chain[i].checkIssued(chain[i + 1])) return no('certificate', `certificate ${i + 1} of the chain is not issued by certificate ${i + 2}: give the site's certificate first, then its issuers in order`);
  }
  const leaf = chain[0];
  let key: KeyObject;
  try {
    key = createPrivateKey(keyPem);
  } catch (err) {
    const msg = (err as Error).message;
    return no('private_key', /passphrase|encrypted/i.test(msg) ? 'an encrypted key: send it without a passphrase' : `not a PEM private key (${msg})`);
  }
  const kd = keyDescription(key);
  if (!(kd.type === 'ec' || (kd.type === 'rsa' && (kd.bits ?? 0) >= 2048))) return no('private_key', `an RSA key of at least 2048 bits or an EC key is needed (this is ${kd.type}${kd.bits ? ` of ${kd.bits} bits` : ''})`);
  if (!leaf.checkPrivateKey(key)) return no('private_key', "does not match the certificate's public key");
  const notBefore = new Date(leaf.validFrom);
  const notAfter = new Date(leaf.validTo);
  if (now < notBefore) return no('certificate', `not valid before ${notBefore.toISOString()}`);
  if (now > notAfter) return no('certificate', `expired on ${notAfter.toISOString()}`);
  const covers = coveredNames(leaf, names);
  if (!covers.length) return no('certificate', `covers none of the site's names (${names.join(', ')}); it is for ${dnsNames(leaf).join(', ') || leaf.subject.replace(/\n/g, ', ')}`);
  return { ok: true, certificate: chain.map((c) => c.toString()).join(''), key: key.export({ type: 'pkcs8', format: 'pem' }).toString(), covers, leaf };
}

const namesOf = (s: Pick<SiteRow, 'domain' | 'aliases'>) => [s.domain, ...s.aliases];

/** What the API shows of an attached certificate: never the key. */
export function certificateView(site: Pick<SiteRow, 'id' | 'domain' | 'aliases' | 'tls_certificate' | 'tls_attached_at'>) {
  const blocks = site.tls_certificate!.match(CERT_BLOCK)!;
  const leaf = new X509Certificate(blocks[0]);
  return {
    site_id: site.id,
    domain: site.domain,
    subject: leaf.subject.replace(/\n/g, ', '),
    issuer: leaf.issuer.replace(/\n/g, ', '),
    sans: dnsNames(leaf),
    covers: coveredNames(leaf, namesOf(site)),
    not_before: new Date(leaf.validFrom).toISOString(),
    not_after: new Date(leaf.validTo).toISOString(),
    fingerprint_sha256: leaf.fingerprint256,
    key: keyDescription(leaf.publicKey),
    chain_length: blocks.length,
    attached_at: site.tls_attached_at,
  };
}

/** The certificate of a site in the actor's subtree; 404 when it has none. */
export async function getCertificate(db: Db, actor: Actor, siteId: string) {
  const site = await siteInScope(db, actor, siteId);
  if (!site.tls_certificate) throw notFound('certificate');
  return certificateView(site);
}

/**
 * Attaches (or replaces) a site's certificate: checked against the locked site row, then the next
 * generation goes to the node with the key in its operation. A refused certificate changes nothing.
 */
export async function attachCertificate(deps: CertificateDeps, actor: Actor, siteId: string, input: CertificateInput) {
  let key = '';
  const site = await changeSite(
    deps,
    actor,
    siteId,
    (row) => {
      const c = checkCertificatePair(input.certificate, input.private_key, namesOf(row));
      if (!c.ok) throw invalid(c.field, c.why);
      key = c.key;
      const before = row.tls_certificate ? { fingerprint_sha256: certificateView(row).fingerprint_sha256 } : null;
      return {
        action: 'site.certificate.attach',
        changes: { tls_certificate: c.certificate, tls_key_sealed: seal(deps.sealingKey, c.key), tls_attached_at: new Date() },
        before,
        after: { fingerprint_sha256: c.leaf.fingerprint256, not_after: new Date(c.leaf.validTo).toISOString(), covers: c.covers },
      };
    },
    (row) => ({ ...specOf(row), tls: { certificate: row.tls_certificate!, key } }),
  );
  const row: SiteRow = await deps.db('panel_sites').where({ id: site.id }).first();
  return { certificate: certificateView(row), site };
}

/** Removes a site's certificate: the next generation serves HTTP only and the node deletes the files. */
export async function removeCertificate(deps: SitesDeps, actor: Actor, siteId: string) {
  return changeSite(deps, actor, siteId, (row) => {
    if (!row.tls_certificate) throw notFound('certificate');
    return {
      action: 'site.certificate.remove',
      changes: { tls_certificate: null, tls_key_sealed: null, tls_attached_at: null },
      before: { fingerprint_sha256: certificateView(row).fingerprint_sha256 },
      after: null,
    };
  });
}
