import ipaddr from 'ipaddr.js';

/**
 * The address that per-address limits are keyed by. An IPv4-mapped IPv6 address is its IPv4
 * address (a dual-stack socket reports `::ffff:1.2.3.4`), and an IPv6 address is cut to its /64:
 * one host usually holds a whole /64, so keying by the full address would hand an attacker 2^64
 * fresh budgets. `ip` is Fastify's `req.ip`: the socket's peer, or the client named in
 * X-Forwarded-For when the peer is a proxy trusted with --trust-proxy.
 */
export function clientAddress(ip: string | undefined): string {
  if (!ip || !ipaddr.isValid(ip)) return 'unknown';
  const parsed = ipaddr.process(ip);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const parts = (parsed as ipaddr.IPv6).parts.slice(0, 4).map((p) => p.toString(16));
  return `${parts.join(':')}::/64`;
}
