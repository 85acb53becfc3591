import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

// A small certificate authority for the encrypted-connection tests, made with the openssl CLI: a CA,
// and server or client certificates it signs (EC P-256), written as PEM files in `dir`.

const openssl = (args: string[], cwd: string) => execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });

export interface Pem {
  cert: string;
  key: string;
}

export class TestCa {
  readonly cert: string;
  private readonly key: string;
  private serial = 1;

  constructor(
    private readonly dir: string,
    readonly name: string,
  ) {
    this.cert = path.join(dir, `${name}-ca.pem`);
    this.key = path.join(dir, `${name}-ca.key`);
    openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', this.key, '-subj', `/CN=${name} test CA`, '-days', '2', '-out', this.cert], dir);
  }

  /** A certificate for `names` (DNS names, or IP addresses as `IP:…`), for a server or a client. */
  issue(file: string, names: string[], usage: 'server' | 'client'): Pem {
    const [cert, key, csr, ext] = ['pem', 'key', 'csr', 'ext'].map((e) => path.join(this.dir, `${file}.${e}`));
    openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-subj', `/CN=${names[0].replace(/^IP:/, '')}`, '-out', csr], this.dir);
    const san = names.map((n) => (n.startsWith('IP:') ? n : `DNS:${n}`)).join(',');
    fs.writeFileSync(ext, `subjectAltName=${san}\nextendedKeyUsage=${usage === 'server' ? 'serverAuth' : 'clientAuth'}\n`);
    openssl(['x509', '-req', '-in', csr, '-CA', this.cert, '-CAkey', this.key, '-set_serial', String(this.serial++), '-days', '2', '-extfile', ext, '-out', cert], this.dir);
    return { cert, key };
  }
}
