import { X509Certificate } from 'node:crypto';
import { invalid, notFound } from '../../../domain/panel/errors';
import type { Db } from '../../../platform/db';
import { seal } from '../../../platform/secret-box';
import type { Actor } from '../shared/actor';
import { CERT_BLOCK, checkCertificatePair, coveredNames, dnsNames, keyDescription } from './check';
import { changeSite, siteInScope, specOf, type SiteRow, type SitesDeps } from '../sites/sites';

// TLS certificates attached to websites (PANEL.md section 2: the vhost has TLS when a certificate is
// attached). A certificate is checked before anything changes (./certificate-check.ts). The chain
// is stored re-encoded, the key sealed with the panel's sealing key; the key leaves the panel only
// inside the site.apply operation that attaches it (stripped from the operation's row once
// finished) and is never returned by the API.

export type CertificateDeps = SitesDeps & { sealingKey: Buffer };

export interface CertificateInput {
  /** PEM: the site's certificate first, then intermediates */
  certificate: string;
  /** PEM, unencrypted (PKCS#1, SEC1 or PKCS#8) */
  private_key: string;
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
