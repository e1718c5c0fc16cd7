import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AddressCounter, addressKey, connectionLimits } from '../../../src/service/connection-limits.js';
import { loadOrCreateTls } from '../../../src/service/tls.js';

describe('addressKey', () => {
  it('counts IPv4 (also IPv4-mapped) by address and IPv6 by /64', () => {
    expect(addressKey('127.0.0.3')).toBe('127.0.0.3');
    expect(addressKey('::ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(addressKey('2001:db8:1:2:aaaa::1')).toBe(addressKey('2001:db8:1:2:ffff:1:2:3'));
    expect(addressKey('2001:db8:1:2::1')).not.toBe(addressKey('2001:db8:1:3::1'));
    expect(addressKey(undefined)).toBe('(unknown)');
  });
});

describe('AddressCounter', () => {
  it('refuses past the cap, frees a place on release and forgets empty addresses', () => {
    const c = new AddressCounter(2);
    expect([c.tryAcquire('a'), c.tryAcquire('a'), c.tryAcquire('a'), c.tryAcquire('b')]).toEqual([true, true, false, true]);
    c.release('a');
    expect(c.tryAcquire('a')).toBe(true);
    c.release('a');
    c.release('a');
    c.release('b');
    expect(c.addresses).toBe(0);
    expect(new AddressCounter(0).tryAcquire('x')).toBe(true);
  });
});

describe('connectionLimits', () => {
  it('converts seconds to whole milliseconds and keeps the request timeout at least the headers timeout', () => {
    expect(
      connectionLimits({
        handshakeTimeout: 0.25,
        headersTimeout: 20,
        requestTimeout: 5,
        keepAliveTimeout: 5,
        maxConnectionsPerAddress: 256,
      }),
    ).toEqual({
      handshakeTimeoutMs: 250,
      headersTimeoutMs: 20_000,
      requestTimeoutMs: 20_000,
      keepAliveTimeoutMs: 5_000,
      maxPerAddress: 256,
    });
  });
});

describe('per-host certificates', () => {
  const sni = (tls: Awaited<ReturnType<typeof loadOrCreateTls>>, name: string) =>
    new Promise<unknown>((resolve, reject) => tls.SNICallback!(name, (err, ctx) => (err ? reject(err) : resolve(ctx))));

  it('issues only for names the predicate accepts, and keeps at most the cache size', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dp-tls-'));
    try {
      const tls = await loadOrCreateTls({ dataDir: dir, certCacheSize: 2, issuable: async (name) => name.startsWith('t') });
      expect(await sni(tls, 'nobody.localhost')).toBeUndefined();
      expect(await sni(tls, 'example.com')).toBeUndefined();
      for (const name of ['t1.localhost', 't2.localhost', 't3.localhost']) expect(await sni(tls, name)).toBeDefined();
      await sni(tls, 't3.localhost');
      expect(tls.certStats!()).toEqual({ issued: 3, cached: 2 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
