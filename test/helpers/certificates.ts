import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type tls from 'node:tls';

// Real certificates for the TLS tests, made with Debian's openssl: self-signed for the names given
// (first name in the subject, all as DNS SANs), RSA or EC keys, and expired ones (`openssl ca` with
// dates in the past, since `req -x509` cannot start a certificate before now).

export interface TestCertificate {
  certificate: string;
  key: string;
}

export interface CertificateOptions {
  names: string[];
  /** default ec */
  key?: 'ec' | 'rsa2048' | 'rsa1024';
  /** valid from 2020-01-01 to 2020-02-01 */
  expired?: boolean;
}

const openssl = (args: string[], cwd: string) => execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] }).toString();

export function makeCertificate(o: CertificateOptions): TestCertificate {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'test-cert-'));
  try {
    const kind = o.key ?? 'ec';
    openssl(['genpkey', '-algorithm', kind === 'ec' ? 'EC' : 'RSA', '-pkeyopt', kind === 'ec' ? 'ec_paramgen_curve:P-256' : `rsa_keygen_bits:${kind === 'rsa1024' ? 1024 : 2048}`, '-out', 'key.pem'], dir);
    const subject = ['-subj', `/CN=${o.names[0]}`, '-addext', `subjectAltName=${o.names.map((n) => `DNS:${n}`).join(',')}`];
    if (!o.expired) openssl(['req', '-x509', '-new', '-key', 'key.pem', ...subject, '-days', '30', '-out', 'cert.pem'], dir);
    else {
      openssl(['req', '-new', '-key', 'key.pem', ...subject, '-out', 'csr.pem'], dir);
      fs.writeFileSync(path.join(dir, 'index.txt'), '');
      fs.writeFileSync(path.join(dir, 'serial'), '01\n');
      fs.writeFileSync(
        path.join(dir, 'ca.cnf'),
        `[ca]\ndefault_ca = d\n[d]\ndatabase = ${dir}/index.txt\nnew_certs_dir = ${dir}\nserial = ${dir}/serial\ndefault_md = sha256\npolicy = any\ncopy_extensions = copy\n[any]\ncommonName = supplied\n`,
      );
      openssl(['ca', '-batch', '-selfsign', '-config', 'ca.cnf', '-keyfile', 'key.pem', '-in', 'csr.pem', '-startdate', '20200101000000Z', '-enddate', '20200201000000Z', '-notext', '-out', 'cert.pem'], dir);
    }
    return { certificate: fs.readFileSync(path.join(dir, 'cert.pem'), 'utf8'), key: fs.readFileSync(path.join(dir, 'key.pem'), 'utf8') };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** GET over HTTPS from a node's TLS port with SNI `host` (the certificate is not verified: the caller checks its fingerprint). */
export function getOverTls(port: number, host: string, p = '/'): Promise<{ status: number; body: string; fingerprint256: string }> {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port, path: p, servername: host, headers: { host }, agent: false, rejectUnauthorized: false }, (res) => {
      const fingerprint256 = (res.socket as tls.TLSSocket).getPeerCertificate().fingerprint256;
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (x: string) => (body += x));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, fingerprint256 }));
    });
    req.on('error', reject);
  });
}
