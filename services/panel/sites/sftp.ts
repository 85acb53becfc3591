import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { invalid, notFound, PanelError } from '../../../domain/panel/errors';
import type { NodeFacts } from '../../../domain/panel/node-ops';
import { MAX_KEY_LABEL, MAX_SFTP_KEYS, parseKeygenList, splitKeyLine, weakKeyProblem, type SftpKey } from '../../../domain/panel/sftp';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { changeSite, siteInScope, type SitesDeps } from './sites';

// SFTP for site owners (issue 34 §2): a site's keys (add with a label, list, remove; at most 20)
// and its endpoint on its node. Keys are parsed and fingerprinted by ssh-keygen itself; each change
// is a new generation of the site, whose node operation rewrites the login's authorized keys at once
// and ends the sessions of a removed key. Scope is the site's (404 outside the actor's subtree). A site
// the node measured at or over its quota is read-only over SFTP (the node's facts say which).

export interface AddSftpKeyInput {
  label: string;
  public_key: string;
}

const keyView = (k: SftpKey) => ({ id: k.id, label: k.label, type: k.type, bits: k.bits, fingerprint: k.fingerprint, added_at: k.added_at });

/** `ssh-keygen -l` of one key line (from stdin): its bits, SHA-256 fingerprint and type; null: ssh-keygen cannot read it. */
function fingerprint(line: string): Promise<ReturnType<typeof parseKeygenList>> {
  return new Promise((resolve) => {
    const child = execFile('ssh-keygen', ['-l', '-E', 'sha256', '-f', '-'], { timeout: 10_000 }, (err, stdout) => resolve(err ? null : parseKeygenList(String(stdout))));
    child.stdin?.on('error', () => {});
    child.stdin?.end(`${line}\n`);
  });
}

/** A key as the panel records it: the line checked by shape and by ssh-keygen, weak ones refused. */
async function checkKey(input: AddSftpKeyInput): Promise<Omit<SftpKey, 'id' | 'added_at'>> {
  const label = input.label.trim();
  if (!label || label.length > MAX_KEY_LABEL || /[\p{Cc}]/u.test(label)) throw invalid('label', `1 to ${MAX_KEY_LABEL} characters, no control characters`);
  const line = splitKeyLine(input.public_key);
  if (!line) throw invalid('public_key', 'not an OpenSSH public key: give one line "type base64-key [comment]", such as the content of ~/.ssh/id_ed25519.pub');
  const publicKey = `${line.type} ${line.blob}`;
  const parsed = await fingerprint(publicKey);
  if (!parsed) throw invalid('public_key', `ssh-keygen cannot read this ${line.type} key (damaged or not a public key)`);
  const weak = weakKeyProblem(parsed);
  if (weak) throw invalid('public_key', weak);
  return { label, type: parsed.type, bits: parsed.bits, fingerprint: parsed.fingerprint, public_key: publicKey };
}

/** The site's SFTP endpoint on its node (null where the node offers no SFTP) and its keys. */
export async function getSftp(db: Db, actor: Actor, siteId: string) {
  const site = await siteInScope(db, actor, siteId);
  const node: { facts: NodeFacts | null } | undefined = await db('panel_nodes').where({ name: site.node_name }).first('facts');
  const sftp = node?.facts?.sftp ?? null;
  const user = sftp?.users?.[site.id] ?? null;
  const readOnly = Array.isArray(sftp?.readOnly) && sftp.readOnly.includes(site.id);
  return {
    // a wildcard listener has no one address: the node's own address is the host then
    endpoint: sftp ? { host: ['0.0.0.0', '::'].includes(sftp.host) ? null : sftp.host, port: sftp.port, user } : null,
    login_allowed: !!sftp && !!user && !site.suspended && !site.org_suspended && site.sftp_keys.length > 0,
    // the node's own word at its last measurement: at or over the quota, logins may read but not write
    read_only: readOnly,
    read_only_reason: readOnly ? `over quota: the site's measured disk use is at or over its quota of ${site.quota_mb} MB; remove files with the file manager (an SFTP rm is a write too) and writes come back at the node's next measurement` : null,
    keys: site.sftp_keys.map(keyView),
    max_keys: MAX_SFTP_KEYS,
  };
}

export async function addSftpKey(deps: SitesDeps, actor: Actor, siteId: string, input: AddSftpKeyInput) {
  await siteInScope(deps.db, actor, siteId); // 404 before any other answer outside the subtree
  const key: SftpKey = { id: randomUUID(), ...(await checkKey(input)), added_at: new Date().toISOString() };
  const site = await changeSite(deps, actor, siteId, (s) => {
    if (s.sftp_keys.length >= MAX_SFTP_KEYS) throw new PanelError('limit_reached', { limit: 'sftp_keys', level: `website ${s.domain}`, value: MAX_SFTP_KEYS, detail: 'remove a key before adding another' });
    const same = s.sftp_keys.find((k) => k.fingerprint === key.fingerprint);
    if (same) throw invalid('public_key', `this key is on the website already (label "${same.label}")`);
    return { action: 'site.sftp_key.add', changes: { sftp_keys: JSON.stringify([...s.sftp_keys, key]) as unknown as SftpKey[] }, before: null, after: keyView(key) };
  });
  return { key: keyView(key), site };
}

export async function removeSftpKey(deps: SitesDeps, actor: Actor, siteId: string, keyId: string) {
  const site = await changeSite(deps, actor, siteId, (s) => {
    const key = s.sftp_keys.find((k) => k.id === keyId);
    if (!key) throw notFound('SFTP key');
    return { action: 'site.sftp_key.remove', changes: { sftp_keys: JSON.stringify(s.sftp_keys.filter((k) => k.id !== keyId)) as unknown as SftpKey[] }, before: keyView(key), after: null };
  });
  return { site };
}
