import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { connect, isIP, type LookupFunction, type Socket } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * The egress policy: which addresses the service may open a connection to on behalf of a tenant
 * (connector sources, webhook and Slack deliveries, SMTP, identity providers). Without it a
 * read-write key could use connector tests as a port scanner of the service's network, or a
 * webhook to reach the cloud metadata endpoint.
 *
 * The check is made on the address actually connected to, after DNS: every connection resolves
 * its host once through `lookup` below, which drops denied addresses, so the socket can only
 * connect to an address that passed (no DNS rebinding between check and connect). A literal IP
 * host is checked the same way, before any packet is sent, so a refusal looks the same and comes
 * as fast whether the port is open or not.
 *
 * Rules: the most specific matching range decides (longest prefix, like a routing table); at
 * equal length deny wins; an address no range matches is allowed. So `--egress-allow
 * 10.1.2.3/32` opens one host inside the denied 10.0.0.0/8, and `--egress-deny 0.0.0.0/0,::/0`
 * with an allow list turns the policy into an allow list. The unspecified addresses (0.0.0.0/8,
 * ::), which reach the service's own host, are never connected to.
 */

/** Denied unless the operator says otherwise: link-local and cloud metadata, private and shared networks. Loopback stays open for local development. */
export const DEFAULT_EGRESS_DENY = [
  '169.254.0.0/16', // link-local, cloud metadata (169.254.169.254)
  'fe80::/10', // IPv6 link-local
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '100.64.0.0/10', // shared address space (carrier NAT, some cluster networks, Alibaba metadata 100.100.100.200)
  'fc00::/7', // IPv6 unique local (AWS metadata fd00:ec2::254)
];

/** Addresses that mean "this host": never a destination, whatever the lists say. */
const UNSPECIFIED = ['0.0.0.0/8', '::/128'];

export interface EgressRules {
  /** CIDRs (or bare addresses); the word `default` stands for DEFAULT_EGRESS_DENY. */
  allow?: readonly string[];
  /** Same form; undefined: DEFAULT_EGRESS_DENY. */
  deny?: readonly string[];
}

type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** A refused connection, reported like a network failure of the feature that tried it. */
export class EgressDenied extends Error {
  readonly code = 'EEGRESSDENIED';
  constructor(host: string) {
    super(`egress to ${host} is denied by the service's egress policy`);
  }
}

/** One range: `a.b.c.d/n`, `x::y/n` or a bare address (a /32 or /128). IPv4-mapped IPv6 ranges become IPv4 ones. */
export function parseCidr(text: string): Cidr {
  const value = text.trim();
  let cidr: Cidr;
  try {
    cidr = value.includes('/') ? ipaddr.parseCIDR(value) : [ipaddr.parse(value), ipaddr.parse(value).kind() === 'ipv4' ? 32 : 128];
  } catch {
    throw new Error(`"${value}" is not a CIDR range (give e.g. 10.0.0.0/8, fd00::/8 or 203.0.113.7)`);
  }
  const [addr, bits] = cidr;
  if (addr instanceof ipaddr.IPv6 && addr.isIPv4MappedAddress() && bits >= 96) return [addr.toIPv4Address(), bits - 96];
  return cidr;
}

/** A comma-separated list (flag or environment value): `default` expands, `none` or nothing is the empty list. */
export function parseCidrList(text: string, source: string): string[] {
  const items = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 1 && items[0] === 'none') return [];
  for (const item of items) {
    if (item === 'default') continue;
    try {
      parseCidr(item);
    } catch (err) {
      throw new Error(`${source}: ${(err as Error).message}`, { cause: err });
    }
  }
  return items;
}

const expand = (list: readonly string[]) => list.flatMap((item) => (item === 'default' ? DEFAULT_EGRESS_DENY : [item])).map(parseCidr);

/** The prefix length of the most specific range of `list` containing `addr`; -1 when none does. */
function longestMatch(addr: ipaddr.IPv4 | ipaddr.IPv6, list: Cidr[]): number {
  let best = -1;
  for (const [range, bits] of list) if (range.kind() === addr.kind() && bits > best && addr.match(range, bits)) best = bits;
  return best;
}

export class EgressPolicy {
  private readonly allow: Cidr[];
  private readonly deny: Cidr[];
  private readonly unspecified = UNSPECIFIED.map(parseCidr);

  constructor(rules: EgressRules = {}) {
    this.allow = expand(rules.allow ?? []);
    this.deny = expand(rules.deny ?? DEFAULT_EGRESS_DENY);
  }

  /** Whether a connection to this IP address (not a host name) is allowed. Anything unparsable is refused. */
  permits(address: string): boolean {
    let addr: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      // process(): an IPv4-mapped IPv6 address (::ffff:10.0.0.1) is judged as the IPv4 address it reaches.
      addr = ipaddr.process(address.replace(/^\[|\]$/g, ''));
    } catch {
      return false;
    }
    if (longestMatch(addr, this.unspecified) >= 0) return false;
    const denied = longestMatch(addr, this.deny);
    return denied < 0 || longestMatch(addr, this.allow) > denied;
  }

  /** Throws EgressDenied when `host` is a literal IP address the policy refuses (host names are checked by `lookup`). */
  checkLiteral(host: string): void {
    const bare = host.replace(/^\[|\]$/g, '');
    if (isIP(bare) && !this.permits(bare)) throw new EgressDenied(bare);
  }

  /**
   * A `lookup` for net/tls/undici: resolves once, keeps only the permitted addresses, and fails
   * with EgressDenied when none is left. The socket connects to what this returns, nothing else.
   */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    dnsLookup(hostname, { ...(options as LookupOptions), all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      const permitted = addresses.filter((a) => this.permits(a.address));
      // The resolved addresses are not named: the service's resolver must not become an oracle for internal names.
      if (!permitted.length) return callback(new EgressDenied(hostname), '', 0);
      if ((options as LookupOptions).all) return callback(null, permitted);
      callback(null, permitted[0].address, permitted[0].family);
    });
  };

  /** The first permitted address of `host` (itself when it is an IP), for clients that cannot take a `lookup` (pg). */
  async resolve(host: string, timeoutMs: number): Promise<string> {
    this.checkLiteral(host);
    const bare = host.replace(/^\[|\]$/g, '');
    if (isIP(bare)) return bare;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error(`resolving ${host} timed out`), { code: 'ETIMEDOUT' })), timeoutMs);
    });
    const lookup = new Promise<string>((resolve, reject) =>
      this.lookup(host, {}, (err, address) => (err ? reject(err) : resolve(address as string))),
    );
    try {
      return await Promise.race([lookup, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A plain TCP connection to host:port through the policy (SMTP's getSocket), within timeoutMs. */
  connect(host: string, port: number, timeoutMs: number): Promise<Socket> {
    return new Promise((resolve, reject) => {
      try {
        this.checkLiteral(host);
      } catch (err) {
        return reject(err);
      }
      const socket = connect({ host: host.replace(/^\[|\]$/g, ''), port, lookup: this.lookup, timeout: timeoutMs });
      const fail = (err: Error) => {
        socket.destroy();
        reject(err);
      };
      socket.once('error', fail);
      socket.once('timeout', () => fail(Object.assign(new Error(`connection to ${host}:${port} timed out`), { code: 'ETIMEDOUT' })));
      socket.once('connect', () => {
        socket.removeListener('error', fail);
        // Until the SMTP client attaches its own listener, an error must not be an uncaught one.
        socket.on('error', () => undefined);
        socket.setTimeout(0);
        resolve(socket);
      });
    });
  }
}

/** The options a service's policy is built from (ServiceOptions' egress fields). */
export interface EgressOptions {
  egressAllow?: readonly string[];
  egressDeny?: readonly string[];
}

const policies = new WeakMap<EgressOptions, EgressPolicy>();

/** The service's policy, built once per options object (throws on a bad range: called at startup). */
export function egressPolicy(options: EgressOptions): EgressPolicy {
  let policy = policies.get(options);
  if (!policy) policies.set(options, (policy = new EgressPolicy({ allow: options.egressAllow, deny: options.egressDeny })));
  return policy;
}
