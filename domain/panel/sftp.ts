// SFTP for site owners (issue 34 §2, docs/panel/sites.md "SFTP"): the node's own sshd config and the
// rules for site keys. The config is the same for every site (chroot to the login's home, which is
// the site's root-owned folder), so adding or removing a site or a key never reloads sshd; only a
// site crossing its soft quota does (its login becomes read-only: internal-sftp -R).

/** Keys a site may hold. */
export const MAX_SFTP_KEYS = 20;
/** RSA keys shorter than this are refused (NIST SP 800-57: 2048 bits at least). */
export const MIN_RSA_BITS = 2048;
export const MAX_KEY_LABEL = 100;

/** Where a node keeps its SFTP files: host keys, the root-owned folder of each login's authorized keys. */
export function sftpPaths(root: string) {
  return {
    config: `${root}/etc/ssh/sshd_config`,
    hostKeys: [`${root}/etc/ssh/ssh_host_ed25519_key`, `${root}/etc/ssh/ssh_host_rsa_key`],
    keysDir: `${root}/sftp/keys`,
    keysOf: (user: string) => `${root}/sftp/keys/${user}`,
    pid: `${root}/run/sshd.pid`,
    log: `${root}/log/sshd.log`,
  };
}

/**
 * The node's sshd_config: keys only from the root-owned keys folder, logins of site users only
 * (`s_*`, site-users.ts), each chrooted to its home (the site folder) with internal-sftp forced,
 * nothing forwarded. VERBOSE logs the key and the session's port (hosting-node/sftp.ts reads them).
 * `readOnlyUsers` (sites at or over their quota) get `internal-sftp -R` in a Match block, which
 * must come last: every line after a Match belongs to it.
 */
export function renderSshdConfig(o: { root: string; host: string; port: number; readOnlyUsers?: string[] }): string {
  const p = sftpPaths(o.root);
  return [
    '# rendered by the hosting node (domain/panel/sftp.ts): SFTP for the sites, never a shell',
    `Port ${o.port}`,
    `ListenAddress ${o.host}`,
    ...p.hostKeys.map((k) => `HostKey ${k}`),
    `PidFile ${p.pid}`,
    'LogLevel VERBOSE',
    `AuthorizedKeysFile ${p.keysDir}/%u`,
    'PubkeyAuthentication yes',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'HostbasedAuthentication no',
    'PermitRootLogin no',
    'PermitEmptyPasswords no',
    'UsePAM no',
    'StrictModes yes',
    'AllowUsers s_*',
    'AllowTcpForwarding no',
    'AllowStreamLocalForwarding no',
    'GatewayPorts no',
    'X11Forwarding no',
    'AllowAgentForwarding no',
    'PermitTunnel no',
    'PermitTTY no',
    'PermitUserRC no',
    'PermitUserEnvironment no',
    'Subsystem sftp internal-sftp',
    'ChrootDirectory %h',
    'ForceCommand internal-sftp',
    ...(o.readOnlyUsers?.length ? ['# sites at or over their soft quota: reads only', `Match User ${[...o.readOnlyUsers].sort().join(',')}`, '    ForceCommand internal-sftp -R'] : []),
    '',
  ].join('\n');
}

/** Whether a site's SFTP is read-only: its measured disk use at or over its quota (absent quota: never). */
export const sftpOverQuota = (diskMb: number | undefined, quotaMb: number | undefined): boolean => diskMb !== undefined && quotaMb !== undefined && diskMb >= quotaMb;

/** A public key as the panel stores it: `type base64` (the comment dropped: the label names it). */
export interface SftpKeyLine {
  type: string;
  blob: string;
}

/** The `type base64 [comment]` of one OpenSSH public key line; null: not that shape (options, several lines, other formats). */
export function splitKeyLine(raw: string): SftpKeyLine | null {
  const m = /^((?:ssh|ecdsa|sk)-[A-Za-z0-9@.-]{1,60}) ([A-Za-z0-9+/]{16,16000}={0,2})(?: [^\r\n]{0,1000})?$/.exec(raw.trim());
  return m ? { type: m[1], blob: m[2] } : null;
}

/** What `ssh-keygen -l -f` prints for one key: `256 SHA256:… comment (ED25519)`. */
export function parseKeygenList(out: string): { bits: number; fingerprint: string; type: string } | null {
  const m = /^(\d+) (SHA256:[A-Za-z0-9+/]+) .*\(([A-Z0-9-]+)\)\s*$/.exec(out.trim().split('\n')[0] ?? '');
  return m ? { bits: Number(m[1]), fingerprint: m[2], type: m[3] } : null;
}

/** Why a parsed key is refused (DSA, short RSA); null: accepted. */
export function weakKeyProblem(k: { type: string; bits: number }): string | null {
  if (k.type === 'DSA') return 'DSA keys are refused (OpenSSH disabled them: 1024 bits, SHA-1); use ed25519 or RSA of 2048 bits or more';
  if (k.type === 'RSA' && k.bits < MIN_RSA_BITS) return `RSA keys of ${k.bits} bits are refused: at least ${MIN_RSA_BITS} bits (or use ed25519)`;
  return null;
}

/** A site's SFTP key as the panel records it (panel_sites.sftp_keys). */
export interface SftpKey {
  id: string;
  label: string;
  /** ssh-keygen's name of the algorithm: ED25519, RSA, ECDSA, ED25519-SK … */
  type: string;
  bits: number;
  /** SHA256:… as ssh-keygen -l and sshd's log print it */
  fingerprint: string;
  /** `type base64`: the authorized_keys line the node writes */
  public_key: string;
  added_at: string;
}
