import { describe, expect, it } from 'vitest';
import { DEFAULT_EGRESS_DENY, EgressDenied, EgressPolicy, parseCidr, parseCidrList } from '../../../src/service/egress.js';

describe('egress policy: which addresses may be connected to', () => {
  it('by default denies link-local, cloud metadata and private ranges, and allows loopback and public addresses', () => {
    const p = new EgressPolicy();
    for (const a of [
      '169.254.169.254',
      'fe80::1',
      '10.1.2.3',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '100.100.100.200',
      'fd00:ec2::254',
      'fc00::1',
    ])
      expect(p.permits(a), a).toBe(false);
    for (const a of ['127.0.0.1', '127.8.9.10', '::1', '8.8.8.8', '172.32.0.1', '2001:db8::1', '1.1.1.1'])
      expect(p.permits(a), a).toBe(true);
  });

  it('judges an IPv4-mapped IPv6 address as the IPv4 address it reaches', () => {
    const p = new EgressPolicy({ deny: ['127.0.0.0/8'] });
    expect(p.permits('::ffff:127.0.0.1')).toBe(false);
    expect(p.permits('::ffff:169.254.169.254')).toBe(true); // the default list was replaced
    expect(new EgressPolicy().permits('::ffff:169.254.169.254')).toBe(false);
    // A mapped range in the list is the IPv4 range.
    expect(new EgressPolicy({ deny: ['::ffff:10.0.0.0/104'] }).permits('10.9.9.9')).toBe(false);
  });

  it('never allows the unspecified addresses, which reach the service host itself', () => {
    const p = new EgressPolicy({ deny: [], allow: ['0.0.0.0/0', '::/0'] });
    for (const a of ['0.0.0.0', '0.1.2.3', '::', '::ffff:0.0.0.0']) expect(p.permits(a), a).toBe(false);
  });

  it('resolves ties towards deny, and narrower allows or denies override wider ones', () => {
    const tie = new EgressPolicy({ deny: ['10.0.0.0/8'], allow: ['10.0.0.0/8'] });
    expect(tie.permits('10.1.2.3')).toBe(false);
    const p = new EgressPolicy({ deny: ['10.0.0.0/8', '10.0.5.0/24'], allow: ['10.0.0.0/9', '192.168.1.7'] });
    expect(p.permits('10.1.2.3')).toBe(true); // /9 allow beats /8 deny
    expect(p.permits('10.0.5.9')).toBe(false); // /24 deny beats /9 allow
    expect(p.permits('10.200.0.1')).toBe(false); // only the /8 deny matches
    expect(p.permits('192.168.1.7')).toBe(true); // a bare address is a /32
    const allowList = new EgressPolicy({ deny: ['0.0.0.0/0', '::/0'], allow: ['203.0.113.0/24'] });
    expect(allowList.permits('203.0.113.9')).toBe(true);
    expect(allowList.permits('8.8.8.8')).toBe(false);
    expect(allowList.permits('2001:db8::1')).toBe(false);
  });

  it('refuses what it cannot parse', () => {
    expect(new EgressPolicy({ deny: [] }).permits('not-an-ip')).toBe(false);
  });

  it('checks literal IP hosts (bracketed IPv6 too) and leaves host names to the lookup', () => {
    const p = new EgressPolicy({ deny: ['127.0.0.0/8', '::1/128'] });
    expect(() => p.checkLiteral('127.0.0.1')).toThrow(new EgressDenied('127.0.0.1'));
    expect(() => p.checkLiteral('[::1]')).toThrow("egress to ::1 is denied by the service's egress policy");
    expect(() => p.checkLiteral('example.com')).not.toThrow();
  });

  it('resolves a host name once and refuses it when every address is denied, without naming the addresses', async () => {
    const p = new EgressPolicy({ deny: ['127.0.0.0/8', '::1/128'] });
    const err = await p.resolve('localhost', 5000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EgressDenied);
    expect((err as Error).message).toBe("egress to localhost is denied by the service's egress policy");
    expect(await new EgressPolicy().resolve('localhost', 5000)).toMatch(/^(127\.0\.0\.1|::1)$/);
    await expect(p.resolve('127.0.0.2', 5000)).rejects.toBeInstanceOf(EgressDenied);
  });

  it('keeps only the permitted addresses of a name that has both kinds', async () => {
    const p = new EgressPolicy({ deny: ['::1/128'] });
    const addresses = await new Promise<unknown>((resolve, reject) =>
      p.lookup('localhost', { all: true }, (err, a) => (err ? reject(err) : resolve(a))),
    );
    expect(addresses).toEqual([{ address: '127.0.0.1', family: 4 }]);
  });

  it('parses lists from flags: default expands, none is empty, a bad range names its source', () => {
    expect(parseCidrList('default, 127.0.0.0/8,,::1', '--egress-deny')).toEqual(['default', '127.0.0.0/8', '::1']);
    expect(parseCidrList('none', '--egress-deny')).toEqual([]);
    expect(parseCidrList('', '--egress-deny')).toEqual([]);
    expect(() => parseCidrList('10.0.0.0/33', '--egress-deny')).toThrow('--egress-deny: "10.0.0.0/33" is not a CIDR range');
    expect(() => parseCidrList('localhost', 'DP_EGRESS_ALLOW')).toThrow('DP_EGRESS_ALLOW: "localhost" is not a CIDR range');
    for (const c of DEFAULT_EGRESS_DENY) expect(() => parseCidr(c)).not.toThrow();
  });
});
