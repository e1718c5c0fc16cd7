import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Socket } from 'node:net';
import { startTestService, type TestService } from '../support/service.js';
import { TestHttp } from '../support/http.js';

/** Node keeps whether setNoDelay(true) was applied on the socket under this symbol; it has no public getter. */
function noDelayOf(socket: Socket): boolean {
  const symbol = Object.getOwnPropertySymbols(socket).find((s) => s.description === 'kSetNoDelay');
  if (!symbol) throw new Error('this Node version keeps no kSetNoDelay on sockets: check TCP_NODELAY another way');
  return (socket as unknown as Record<symbol, boolean>)[symbol];
}

/**
 * Every connection reaches the HTTPS server through the plain-HTTP guard (emit('connection')),
 * which skips the HTTPS server's own accept, where Node turns Nagle's algorithm off. With it on, a
 * response written in two parts waited for the client's delayed ACK (40 ms on Linux): a fresh
 * `dpctl plan` waited that long on its first list.
 */
describe('connections', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService();
  });
  afterAll(() => svc?.close());

  it('reach the HTTPS server with Nagle turned off', async () => {
    const tenant = await svc.tenant();
    const handed: Socket[] = [];
    svc.service.app.server.on('connection', (s: Socket) => handed.push(s));
    const http = new TestHttp(svc.service.tls.certPath);
    try {
      const res = await http.call('GET', `${tenant.base}/projects`);
      expect(res.status).toBe(401); // no token: the answer does not matter, the connection does
    } finally {
      await http.close();
    }
    expect(handed.length).toBeGreaterThan(0);
    for (const s of handed) expect(noDelayOf(s)).toBe(true);
  });
});
