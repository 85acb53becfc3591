import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';

// The checks a certificate and its key pass before they are attached to a website (the API and the
// legacy import's certificates step alike): it parses, the chain is in order, the key is RSA of at
// least 2048 bits or EC and matches, it is valid now, and it covers the site's domain or an alias
// (RFC 6125 wildcards: one whole left-most label). No panel state here, so the dry run uses it too.

export const CERT_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;
const MAX_CHAIN = 10;

/** The site's names a certificate covers (RFC 6125: a wildcard stands for exactly one whole left-most label). */
export const coveredNames = (leaf: X509Certificate, names: string[]) =>
  names.filter((n) => leaf.checkHost(n, { wildcards: true, partialWildcards: false, multiLabelWildcards: false, singleLabelSubdomains: false }) !== undefined);

export const dnsNames = (leaf: X509Certificate) =>
  (leaf.subjectAltName ?? '')
    .split(/,\s*/)
    .filter((s) => s.startsWith('DNS:'))
    .map((s) => s.slice(4));

export function keyDescription(key: KeyObject): { type: string; bits?: number; curve?: string } {
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
