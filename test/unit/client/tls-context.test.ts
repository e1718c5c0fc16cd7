import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgent, errorCode, tlsConnectOptions, trustingContext } from '../../../src/client/transport.js';
import { request, UndiciAgent } from '../../../src/client/undici.js';
import { loadOrCreateTls } from '../../../src/service/tls.js';

/**
 * One TLS context per client (the system's roots plus the configured CA, built once) instead of
 * one per connection; and the client's undici parts, loaded from their own files.
 */
const dir = mkdtempSync(join(tmpdir(), 'dp-tls-context-'));
let server: Server;
let base: string;
let caFile: string;

beforeAll(async () => {
  const tls = await loadOrCreateTls({ dataDir: dir });
  caFile = tls.certPath;
  server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ path: req.url }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  base = `https://localhost:${typeof address === 'object' && address ? address.port : 0}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

async function get(agent: InstanceType<typeof UndiciAgent>, path: string) {
  const res = await request(`${base}${path}`, { method: 'GET', dispatcher: agent });
  return { status: res.statusCode, body: (await res.body.json()) as unknown };
}

describe('TLS context', () => {
  it('the configured CA is trusted, on every connection of the client, with one context', async () => {
    const tls = tlsConnectOptions({ caFile });
    expect(tls.secureContext).toBeDefined();
    expect(tls).not.toHaveProperty('ca');
    const agent = createAgent({ caFile, connections: 4 }, tls);
    try {
      // Parallel requests open several connections, all with the same context.
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => get(agent, `/p/${i}?q=${i}`)));
      expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
      expect(answers[3].body).toEqual({ path: '/p/3?q=3' });
    } finally {
      await agent.close();
    }
  });

  it('the CA given as text works the same', async () => {
    const { readFileSync } = await import('node:fs');
    const agent = createAgent({ ca: readFileSync(caFile, 'utf8') });
    try {
      expect((await get(agent, '/x')).status).toBe(200);
    } finally {
      await agent.close();
    }
  });

  it('without the CA the service is not trusted; with insecure it is not verified', async () => {
    const untrusted = createAgent({});
    try {
      const err = await get(untrusted, '/x').catch((e: unknown) => e);
      expect(errorCode(err)).toMatch(/UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT/);
    } finally {
      await untrusted.close();
    }
    const insecure = createAgent({ insecure: true });
    try {
      expect((await get(insecure, '/x')).status).toBe(200);
    } finally {
      await insecure.close();
    }
  });

  it('a context trusting one CA does not trust another', async () => {
    const other = mkdtempSync(join(tmpdir(), 'dp-tls-other-'));
    try {
      const { certPath } = await loadOrCreateTls({ dataDir: other });
      const otherCa = join(other, 'other-ca.pem');
      const { readFileSync } = await import('node:fs');
      writeFileSync(otherCa, readFileSync(certPath));
      const agent = createAgent({}, { ...tlsConnectOptions({ caFile: otherCa }), secureContext: trustingContext(readFileSync(otherCa)) });
      try {
        const err = await get(agent, '/x').catch((e: unknown) => e);
        expect(errorCode(err)).toMatch(/UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT|CERT_SIGNATURE_FAILURE/);
      } finally {
        await agent.close();
      }
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('a missing CA file is a configuration error', () => {
    expect(() => tlsConnectOptions({ caFile: join(dir, 'nope.pem') })).toThrow(/cannot read the CA file/);
  });
});

describe("the client's undici", () => {
  it("is undici's own Agent (the same class as the entry point's)", async () => {
    const undici = await import('undici');
    expect(UndiciAgent).toBe(undici.Agent);
  });
});
