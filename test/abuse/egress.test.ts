import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { closedPort } from '../integration/runtime/helpers.js';
import { BYSTANDER_MAX_MS, whileServingOther } from './support.js';

/**
 * Egress policy (issue 17, attack 9): a read-write key must not be able to port-scan the
 * service's network through connector tests (the answer or its timing told an open port from a
 * closed one), nor reach internal addresses with webhooks, SMTP or SSO discovery. Here loopback
 * is denied (on top of the default list) with one loopback address allowed again, so real
 * listeners on this machine stand for the internal network. Every refusal is the same answer,
 * at once, with nothing reaching the listener, and another tenant is served meanwhile.
 */
let svc: TestService;
let t: TestTenant;
let bystander: TestTenant;
let rwKey: string;
let connectors: string;
let channels: string;
/** An HTTP receiver on a denied address: it must never see a connection. */
let denied: Receiver;
/** One on 127.0.0.2, allowed again by --egress-allow 127.0.0.2/32 inside the denied 127.0.0.0/8. */
let allowed: Receiver;
let closed: number;

interface Receiver {
  port: number;
  connections: number;
  server: Server;
}

async function receiver(host: string): Promise<Receiver> {
  const r: Receiver = { port: 0, connections: 0, server: createServer((_req, res) => res.end('ok')) };
  r.server.on('connection', () => r.connections++);
  await new Promise<void>((resolve) => r.server.listen(0, host, () => resolve()));
  r.port = (r.server.address() as { port: number }).port;
  return r;
}

const REFUSED = (host: string) => `egress to ${host} is denied by the service's egress policy`;

beforeAll(async () => {
  [denied, allowed, closed] = await Promise.all([receiver('127.0.0.1'), receiver('127.0.0.2'), closedPort()]);
  svc = await startTestService({
    egressDeny: ['default', '127.0.0.0/8', '::1/128'],
    egressAllow: ['127.0.0.2/32'],
    sourceTimeout: 2,
    // Email channels go to an SMTP server on a denied address.
    smtpUrl: `smtp://127.0.0.1:${denied.port}`,
  });
  [t, bystander] = await Promise.all([svc.tenant(), svc.tenant()]);
  const project = await svc.project(t, 'egress');
  rwKey = (await svc.apiKey(t, project.id, 'read-write')).key;
  connectors = `/projects/${project.id}/connectors`;
  channels = `/projects/${project.id}/notification-channels`;
});
afterAll(async () => {
  await svc?.close();
  await Promise.all([denied, allowed].map((r) => r && new Promise((resolve) => r.server.close(resolve))));
});

let n = 0;
async function connector(host: string, port: number): Promise<string> {
  const body = {
    name: `scan-${++n}`,
    connector_type: 'postgresql',
    config: { host, port, database: 'postgres', ssl_mode: 'disable' },
    credentials: { username: 'postgres', password: 'x' },
  };
  return (await svc.ok(t, 'POST', connectors, { body, token: rwKey })).id;
}

/** POST .../test with the read-write key: the answer and how long it took. */
async function probe(id: string): Promise<{ status: number; body: { success: boolean; message: string }; ms: number }> {
  const started = performance.now();
  const res = await svc.call(t, 'POST', `${connectors}/${id}/test`, { token: rwKey });
  return { status: res.status, body: res.body, ms: performance.now() - started };
}

describe('connector tests cannot scan ports', () => {
  test('an open and a closed port on a denied address answer the same refusal, at once, with no connection made', async () => {
    const open = await connector('127.0.0.1', denied.port);
    const shut = await connector('127.0.0.1', closed);
    const { result, probe: other } = await whileServingOther(svc, bystander, async () => {
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push(await probe(open), await probe(shut));
      return answers;
    });
    for (const a of result) {
      expect(a.status).toBe(200);
      expect(a.body).toEqual({ success: false, message: REFUSED('127.0.0.1') });
      expect(a.ms).toBeLessThan(500);
    }
    expect(denied.connections).toBe(0);
    expect(other.failures).toEqual([]);
    expect(other.max).toBeLessThan(BYSTANDER_MAX_MS);
  });

  test('the metadata address, IPv6 loopback and an IPv4-mapped loopback are refused as literals', async () => {
    const cases: [string, string][] = [
      ['169.254.169.254', '169.254.169.254'],
      ['::1', '::1'],
      ['::ffff:127.0.0.1', '::ffff:127.0.0.1'],
      ['0.0.0.0', '0.0.0.0'],
    ];
    const { result, probe: other } = await whileServingOther(svc, bystander, () =>
      Promise.all(cases.map(async ([host]) => probe(await connector(host, 5432)))),
    );
    result.forEach((a, i) => {
      expect(a.body).toEqual({ success: false, message: REFUSED(cases[i][1]) });
      expect(a.ms).toBeLessThan(500);
    });
    expect(other.failures).toEqual([]);
    expect(other.max).toBeLessThan(BYSTANDER_MAX_MS);
  });

  test('a host name is checked after DNS: localhost resolves to denied addresses and is refused without naming them', async () => {
    const a = await probe(await connector('localhost', denied.port));
    expect(a.body).toEqual({ success: false, message: REFUSED('localhost') });
    expect(denied.connections).toBe(0);
  });

  test('schema discovery and syncs of a denied source fail with the same message', async () => {
    const id = await connector('127.0.0.1', denied.port);
    const schema = await svc.ok(t, 'GET', `${connectors}/${id}/schema`, { token: rwKey });
    expect(schema.error).toBe(REFUSED('127.0.0.1'));
    const sync = await svc.ok(t, 'POST', `${connectors}/${id}/sync`, { token: rwKey }, 201);
    let run: { status: string; error: string | null } | undefined;
    for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 20))) {
      run = await svc.ok(t, 'GET', `${connectors}/${id}/runs/${sync.run_id}`, { token: rwKey });
      if (run!.status !== 'running' && run!.status !== 'queued') break;
    }
    expect(run).toMatchObject({ status: 'failed', error: REFUSED('127.0.0.1') });
    expect(denied.connections).toBe(0);
  });
});

describe('notification deliveries', () => {
  test('a webhook to a denied address fails once, cleanly, and is recorded as failed; an allowed one is delivered', async () => {
    const make = async (url: string) =>
      (await svc.ok(t, 'POST', channels, { body: { name: `hook-${++n}`, type: 'webhook', config: { url } }, token: rwKey })).id;
    const [literal, named, ok] = await Promise.all([
      make(`http://127.0.0.1:${denied.port}/hook`),
      make(`http://localhost:${denied.port}/hook`),
      make(`http://127.0.0.2:${allowed.port}/hook`),
    ]);
    const { result, probe: other } = await whileServingOther(svc, bystander, () =>
      Promise.all([literal, named, ok].map((id) => svc.call(t, 'POST', `${channels}/${id}/test`, { token: rwKey }))),
    );
    const [a, b, c] = result;
    expect(a.status, a.text).toBe(200);
    expect(a.body).toMatchObject({ success: false, message: REFUSED('127.0.0.1') });
    expect(b.body).toMatchObject({ success: false, message: REFUSED('localhost') });
    expect(c.body).toMatchObject({ success: true, status_code: 200 });
    const deliveries = (await svc.ok(t, 'GET', `${channels}/${literal}/deliveries`, { token: rwKey })).data;
    expect(deliveries).toEqual([expect.objectContaining({ status: 'failed', attempts: 1, message: REFUSED('127.0.0.1') })]);
    expect(denied.connections).toBe(0);
    expect(allowed.connections).toBeGreaterThan(0);
    expect(other.failures).toEqual([]);
    expect(other.max).toBeLessThan(BYSTANDER_MAX_MS);
  });

  test('email through an SMTP server on a denied address fails at once, not retried', async () => {
    const id = (
      await svc.ok(t, 'POST', channels, {
        body: { name: `mail-${++n}`, type: 'email', config: { email_addresses: ['ops@example.com'] } },
        token: rwKey,
      })
    ).id;
    const started = performance.now();
    const res = await svc.call(t, 'POST', `${channels}/${id}/test`, { token: rwKey });
    expect(res.body).toMatchObject({ success: false, message: REFUSED('127.0.0.1') });
    expect(performance.now() - started).toBeLessThan(1_000);
    const deliveries = (await svc.ok(t, 'GET', `${channels}/${id}/deliveries`, { token: rwKey })).data;
    expect(deliveries).toEqual([expect.objectContaining({ status: 'failed', attempts: 1, message: REFUSED('127.0.0.1') })]);
    expect(denied.connections).toBe(0);
  });
});

describe('SSO discovery', () => {
  test('an OIDC issuer on a denied address is a clear 422, and the IdP is never reached', async () => {
    const provider = await svc.ok(t, 'POST', '/sso-providers', {
      body: { name: 'internal', protocol: 'oidc', issuer: `https://127.0.0.1:${denied.port}`, client_id: 'x' },
    });
    const res = await svc.call(t, 'GET', `/auth/sso/${provider.id}/login`, { token: '' });
    expect(res.status, res.text).toBe(422);
    expect(res.body.error.code).toBe('unprocessable_entity');
    expect(res.body.error.message).toContain(REFUSED('127.0.0.1'));
    expect(denied.connections).toBe(0);
  });
});
