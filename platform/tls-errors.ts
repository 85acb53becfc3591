// What a failed TLS handshake means, in the operator's terms: Node's codes say "unable to verify
// the first certificate"; the start-up checks of PostgreSQL and Temporal add which setting to look at.

const NOT_SIGNED_BY_CA = new Set(['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'CERT_SIGNATURE_FAILURE']);

/** `err`'s message, with what to check when it is a certificate the client refused. */
export function describeTlsError(err: NodeJS.ErrnoException, caSetting: string, nameSetting?: string): string {
  const message = err.message.replace(/; if the root CA is installed locally.*$/, '');
  if (err.code && NOT_SIGNED_BY_CA.has(err.code)) return `${message} (${err.code}): the server's certificate is not signed by the CA in ${caSetting}`;
  if (err.code === 'ERR_TLS_CERT_ALTNAME_INVALID') return `${message}: the certificate does not name the host${nameSetting ? ` (see ${nameSetting})` : ''}`;
  if (err.code === 'CERT_HAS_EXPIRED' || err.code === 'CERT_NOT_YET_VALID') return `${message} (${err.code})`;
  return err.code && !/^[0-9A-Z]{5}$/.test(err.code) && !message.includes(err.code) ? `${message} (${err.code})` : message;
}
