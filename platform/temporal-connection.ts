import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import type { TLSConfig } from '@temporalio/common/lib/internal-non-workflow';
import type { Config } from './config';
import { describeTlsError } from './tls-errors';

// How every process reaches Temporal: its address plus TLS (server CA, client pair for mTLS, server
// name override) and Temporal Cloud's API key, from TEMPORAL_* settings. Connection (client) and
// NativeConnection (workers) take the same options; checkTemporalTls says at start what failed.

/** What a connection needs beyond the address; absent (or {}) means plain gRPC. */
export interface TemporalSecurity {
  tls?: TLSConfig;
  apiKey?: string;
}

/** The TLS and API-key settings of the configuration, files read once. */
export function temporalSecurity(c: Pick<Config, 'TEMPORAL_TLS' | 'TEMPORAL_TLS_SERVER_CA_CERT_PATH' | 'TEMPORAL_TLS_CLIENT_CERT_PATH' | 'TEMPORAL_TLS_CLIENT_KEY_PATH' | 'TEMPORAL_TLS_SERVER_NAME' | 'TEMPORAL_API_KEY'>): TemporalSecurity {
  const on = c.TEMPORAL_TLS === true || !!(c.TEMPORAL_TLS_SERVER_CA_CERT_PATH || c.TEMPORAL_TLS_CLIENT_CERT_PATH || c.TEMPORAL_TLS_SERVER_NAME || c.TEMPORAL_API_KEY);
  if (!on) return {};
  return {
    tls: {
      ...(c.TEMPORAL_TLS_SERVER_CA_CERT_PATH ? { serverRootCACertificate: fs.readFileSync(c.TEMPORAL_TLS_SERVER_CA_CERT_PATH) } : {}),
      ...(c.TEMPORAL_TLS_CLIENT_CERT_PATH && c.TEMPORAL_TLS_CLIENT_KEY_PATH ? { clientCertPair: { crt: fs.readFileSync(c.TEMPORAL_TLS_CLIENT_CERT_PATH), key: fs.readFileSync(c.TEMPORAL_TLS_CLIENT_KEY_PATH) } } : {}),
      ...(c.TEMPORAL_TLS_SERVER_NAME ? { serverNameOverride: c.TEMPORAL_TLS_SERVER_NAME } : {}),
    },
    ...(c.TEMPORAL_API_KEY ? { apiKey: c.TEMPORAL_API_KEY } : {}),
  };
}

/** Options for Connection.connect and NativeConnection.connect. */
export function temporalConnectOptions(address: string, s: TemporalSecurity = {}): { address: string; tls?: TLSConfig; apiKey?: string } {
  return { address, ...(s.tls ? { tls: s.tls } : {}), ...(s.apiKey ? { apiKey: s.apiKey } : {}) };
}

/**
 * With TLS on, one TLS handshake with exactly the connection's settings, so that a wrong CA, a
 * refused client certificate or a server name that does not match stops the start with a message
 * naming the address and what failed (the SDK's own errors say "transport error" and retry).
 */
export async function checkTemporalTls(address: string, s: TemporalSecurity, timeoutMs = 10_000): Promise<void> {
  if (!s.tls) return;
  const i = address.lastIndexOf(':');
  const host = address.slice(0, i).replace(/^\[|\]$/g, '');
  const servername = s.tls.serverNameOverride ?? host;
  const what = `Temporal at ${address} (TLS${s.tls.serverNameOverride ? `, server name ${servername}` : ''}${s.tls.serverRootCACertificate ? ', CA from TEMPORAL_TLS_SERVER_CA_CERT_PATH' : ', system CAs'}${s.tls.clientCertPair ? ', client certificate' : ''})`;
  await new Promise<void>((resolve, reject) => {
    const socket = tls.connect({
      host,
      port: Number(address.slice(i + 1)),
      ...(net.isIP(servername) ? {} : { servername }), // SNI carries names only
      ALPNProtocols: ['h2'],
      ...(s.tls!.serverRootCACertificate ? { ca: Buffer.from(s.tls!.serverRootCACertificate) } : {}),
      ...(s.tls!.clientCertPair ? { cert: Buffer.from(s.tls!.clientCertPair.crt), key: Buffer.from(s.tls!.clientCertPair.key) } : {}),
      // a server name override is what the certificate must name (the address may be an IP)
      checkServerIdentity: (_h, cert) => tls.checkServerIdentity(servername, cert),
    });
    const fail = (why: string) => {
      socket.destroy();
      reject(new Error(`${what}: ${why}`));
    };
    socket.setTimeout(timeoutMs, () => fail(`no TLS handshake within ${timeoutMs} ms`));
    socket.once('error', (err: NodeJS.ErrnoException) => fail(describeTlsError(err, 'TEMPORAL_TLS_SERVER_CA_CERT_PATH', 'TEMPORAL_TLS_SERVER_NAME')));
    socket.once('secureConnect', () => {
      // TLS 1.3: a server that refuses the client certificate says so right after the handshake.
      socket.once('data', () => undefined);
      setTimeout(() => {
        if (socket.destroyed) return;
        socket.destroy();
        resolve();
      }, 200);
    });
    socket.once('close', () => fail('the server closed the connection during the handshake (is this a TLS port, does it accept this client certificate?)'));
  });
}
