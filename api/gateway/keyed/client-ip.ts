import net from 'node:net';
import type { Context } from 'koa';

/** `::ffff:127.0.0.1` → `127.0.0.1`; anything else unchanged (trimmed). */
export function normalizeIp(ip: string): string {
  const s = ip.trim();
  return /^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(s) ? s.slice(7) : s;
}

/**
 * The client IP: the socket's address, unless that address is a trusted proxy. Then the
 * X-Forwarded-For list is walked from the right (the entry the nearest proxy appended) past
 * further trusted proxies; the first untrusted address is the client. Entries left of it were
 * written by the client itself and are never believed.
 */
export function clientIpResolver(trustedProxies: string[]): (ctx: Context) => string {
  const trusted = new net.BlockList();
  for (const entry of trustedProxies) {
    const [addr, bits] = entry.split('/');
    const type = net.isIP(addr) === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) trusted.addAddress(addr, type);
    else trusted.addSubnet(addr, Number(bits), type);
  }
  const isTrusted = (ip: string) => {
    const family = net.isIP(ip);
    return family !== 0 && trusted.check(ip, family === 6 ? 'ipv6' : 'ipv4');
  };
  return (ctx) => {
    const socketIp = normalizeIp(ctx.req.socket.remoteAddress ?? '');
    if (trustedProxies.length === 0 || !isTrusted(socketIp)) return socketIp;
    const hops = ctx
      .get('x-forwarded-for')
      .split(',')
      .map(normalizeIp)
      .filter(Boolean);
    let ip = socketIp;
    for (let i = hops.length - 1; i >= 0; i--) {
      ip = hops[i];
      if (!isTrusted(ip)) return ip;
    }
    return ip;
  };
}
