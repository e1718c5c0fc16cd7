import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataPlatformClient } from '../../../src/client/index.js';
import { loadOrCreateTls } from '../../../src/service/tls.js';

/**
 * client.login(): dpctl logs in before it parses the config, so that the login is answered while
 * it parses; the first call then uses those tokens, and an abandoned login stops for good.
 */
const dir = mkdtempSync(join(tmpdir(), 'dp-login-early-'));
let server: Server;
let url: string;
let caFile: string;
const seen: string[] = [];

beforeAll(async () => {
  const tls = await loadOrCreateTls({ dataDir: dir });
  caFile = tls.certPath;
  server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    seen.push(`${req.method} ${req.url?.split('?')[0]}`);
    res.setHeader('content-type', 'application/json');
    if (req.url === '/api/v1/auth/login')
      return res.end(
        JSON.stringify({ access_token: 'access-token-1', refresh_token: 'refresh-token-1', token_type: 'Bearer', expires_in: 900 }),
      );
    if (req.headers.authorization !== 'Bearer access-token-1') {
      res.statusCode = 401;
      return res.end(JSON.stringify({ error: { code: 'unauthorized', message: 'no' } }));
    }
    res.end(JSON.stringify({ data: [{ id: 'prj_1', name: 'one' }], has_more: false }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  url = `https://localhost:${typeof address === 'object' && address ? address.port : 0}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

describe('client.login()', () => {
  it('logs in once; the calls after it use its tokens', async () => {
    seen.length = 0;
    const client = new DataPlatformClient({ url, email: 'a@example.com', password: 'correct-horse', caFile });
    try {
      await client.login();
      await client.login(); // tokens held: nothing sent
      expect(await client.projects.listAll()).toEqual([{ id: 'prj_1', name: 'one' }]);
      expect(seen).toEqual(['POST /api/v1/auth/login', 'GET /api/v1/projects']);
    } finally {
      await client.close();
    }
  });

  it('calls started while it runs join it (one login)', async () => {
    seen.length = 0;
    const client = new DataPlatformClient({ url, email: 'a@example.com', password: 'correct-horse', caFile });
    try {
      const results = await Promise.allSettled([client.login(), client.projects.listAll(), client.projects.listAll()]);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
      expect(seen.filter((s) => s.includes('/auth/login'))).toHaveLength(1);
    } finally {
      await client.close();
    }
  });

  it('with an API key there is nothing to do', async () => {
    seen.length = 0;
    const client = new DataPlatformClient({ url, apiKey: 'dp_key_123456', caFile });
    try {
      await client.login();
      expect(seen).toEqual([]);
    } finally {
      await client.close();
    }
  });

  it('an aborted login stops, retries included, and the next call starts a new one', async () => {
    // Nothing listens on port 1: the login would retry with backoff for seconds.
    const client = new DataPlatformClient({
      url: 'https://acme.localhost:1',
      email: 'a@example.com',
      password: 'correct-horse',
      caFile,
      retry: { minTimeoutMs: 1000, maxTimeoutMs: 1000 },
    });
    try {
      const abort = new AbortController();
      const started = Date.now();
      const login = client.login({ signal: abort.signal });
      setTimeout(() => abort.abort(), 100);
      await expect(login).rejects.toBeTruthy();
      expect(Date.now() - started).toBeLessThan(900);
    } finally {
      await client.close();
    }
  });
});
