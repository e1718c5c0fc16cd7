import { describe, expect, it } from 'vitest';
import { formatRoute, localhostLookup, parseRetryAfter } from '../../../src/client/index.js';
import { EndpointGate } from '../../../src/client/rate-gate.js';
import { classifyNetworkError } from '../../../src/client/transport.js';

const lookup = (host: string, options: Record<string, unknown>) =>
  new Promise<unknown>((resolve, reject) =>
    localhostLookup(
      host,
      options as never,
      ((err: Error | null, address: unknown, family?: number) =>
        err ? reject(err) : resolve(options.all ? address : { address, family })) as never,
    ),
  );

describe('localhostLookup', () => {
  it('resolves localhost and every *.localhost name to loopback without DNS', async () => {
    expect(await lookup('acme.localhost', {})).toEqual({ address: '127.0.0.1', family: 4 });
    expect(await lookup('ACME.Localhost.', {})).toEqual({ address: '127.0.0.1', family: 4 });
    expect(await lookup('localhost', { all: true })).toEqual([{ address: '127.0.0.1', family: 4 }]);
    expect(await lookup('deep.tenant.localhost', { family: 6 })).toEqual({ address: '::1', family: 6 });
  });

  it('passes other names to the system resolver', async () => {
    await expect(lookup('no-such-host.invalid', {})).rejects.toMatchObject({ code: expect.stringMatching(/ENOTFOUND|EAI_AGAIN/) });
    await expect(lookup('localhost.example.invalid', {})).rejects.toBeTruthy();
  });
});

describe('routes and Retry-After', () => {
  it('fills route parameters, encoded', () => {
    expect(formatRoute('/projects/{id}/connectors/{resourceId}', { id: 'prj_1', resourceId: 'a/b c' })).toBe(
      '/projects/prj_1/connectors/a%2Fb%20c',
    );
    expect(() => formatRoute('/projects/{id}', {})).toThrow(/missing path parameter id/);
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    expect(parseRetryAfter('2')).toBe(2000);
    expect(parseRetryAfter(['0.5'])).toBe(500);
    expect(parseRetryAfter(undefined)).toBeUndefined();
    expect(parseRetryAfter('soon')).toBeUndefined();
    const now = Date.UTC(2030, 0, 1, 0, 0, 0);
    expect(parseRetryAfter(new Date(now + 3000).toUTCString(), now)).toBe(3000);
  });
});

describe('EndpointGate', () => {
  it('pauses one key; a later pause never shortens an earlier one; waits end when the pause does', async () => {
    const gate = new EndpointGate();
    const end = gate.pause('GET /a', 60);
    expect(gate.pause('GET /a', 10)).toBe(end);
    expect(gate.pausedUntil('GET /b')).toBeUndefined();
    const started = Date.now();
    const waited = await gate.wait('GET /a', Date.now() + 1000, undefined, () => new Error('too long'));
    expect(Date.now()).toBeGreaterThanOrEqual(end);
    expect(waited).toBeGreaterThanOrEqual(50);
    expect(Date.now() - started).toBeLessThan(500);
    expect(gate.pausedUntil('GET /a')).toBeUndefined();
  });

  it('reports no wait for an open key even when the clock ticks between its reads', async () => {
    let t = 1_000;
    const gate = new EndpointGate(() => t++); // every read of the clock is 1 ms later
    expect(await gate.wait('GET /a', t + 1000, undefined, () => new Error('too long'))).toBe(0);
  });

  it('fails at once when the pause outlasts the deadline, and honours an abort', async () => {
    const gate = new EndpointGate();
    gate.pause('GET /a', 10_000);
    await expect(gate.wait('GET /a', Date.now() + 100, undefined, () => new Error('too long'))).rejects.toThrow('too long');
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    await expect(gate.wait('GET /a', Date.now() + 60_000, controller.signal, () => new Error('too long'))).rejects.toMatchObject({
      name: 'AbortError',
    });
  });
});

describe('classifyNetworkError', () => {
  it('knows what never left, what may have, and what another try will not fix', () => {
    expect(classifyNetworkError('ECONNREFUSED')).toEqual({ transient: true, notSent: true });
    expect(classifyNetworkError('UND_ERR_CONNECT_TIMEOUT')).toEqual({ transient: true, notSent: true });
    expect(classifyNetworkError('UND_ERR_SOCKET')).toEqual({ transient: true, notSent: false });
    expect(classifyNetworkError('ECONNRESET')).toEqual({ transient: true, notSent: false });
    expect(classifyNetworkError('SELF_SIGNED_CERT_IN_CHAIN')).toEqual({ transient: false, notSent: true });
    expect(classifyNetworkError('ERR_TLS_CERT_ALTNAME_INVALID')).toEqual({ transient: false, notSent: true });
    expect(classifyNetworkError('ENOTFOUND')).toEqual({ transient: false, notSent: true });
    // Unknown: possibly sent, so a create is reported ambiguous rather than assumed undone.
    expect(classifyNetworkError('UND_ERR_SOMETHING_NEW')).toEqual({ transient: false, notSent: false });
    expect(classifyNetworkError(undefined)).toEqual({ transient: false, notSent: false });
  });
});
