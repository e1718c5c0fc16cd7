import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { signBody, type RunningController } from '../../src/controller/index.js';
import { createElector, type LeaderElector } from '../../src/controller/leader/index.js';
import { FORWARDED_HEADER, relayFailure, relayToLeader } from '../../src/controller/forward.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { clientFor } from '../integration/engine/helpers.js';
import { gitSourceOf, startTestController, TestRepo, waitFor } from './helpers.js';

/**
 * Two controller replicas in one process, each with its own status listener, electing a leader
 * with the lock elector on a temp lock path, following a real git repository and applying to
 * the real service over HTTPS. Webhooks sent to the standby must reach the leader.
 */
const SECRET = 'forward-test-webhook-secret';
const LEASE_SECONDS = 3;

/**
 * A real lock elector whose release can be held back: `stop()` then closes the replica's
 * listener but keeps its lock fresh, as after a crash within the lease (the standby cannot
 * take over yet and the published URL still names the dead replica).
 */
class ReleaseHeld implements LeaderElector {
  holdRelease = false;
  constructor(readonly inner: LeaderElector) {}
  get description() {
    return this.inner.description;
  }
  get identity() {
    return this.inner.identity;
  }
  acquire(signal: AbortSignal) {
    return this.inner.acquire(signal);
  }
  isLeader() {
    return this.inner.isLeader();
  }
  onLost(listener: () => void) {
    this.inner.onLost(listener);
  }
  leaderUrl() {
    return this.inner.leaderUrl();
  }
  async release() {
    if (!this.holdRelease) await this.inner.release();
  }
}

interface Replica {
  name: string;
  ctl: RunningController;
  elector: ReleaseHeld;
}

let svc: TestService;
let t: TestTenant;
let repo: TestRepo;
const dir = mkdtempSync(join(tmpdir(), 'dp-ctl-forward-'));
const lockPath = join(dir, 'leader.lock');
/** Holds the lock before the replicas start, so that neither leads until the test lets go. */
const ghost = createElector({ kind: 'lock', path: lockPath, identity: 'ghost', leaseSeconds: LEASE_SECONDS });
const replicas: Replica[] = [];

async function startReplica(name: string): Promise<Replica> {
  let url: string | undefined;
  const elector = new ReleaseHeld(
    createElector({ kind: 'lock', path: lockPath, identity: name, leaseSeconds: LEASE_SECONDS, advertise: () => url }),
  );
  const ctl = await startTestController({
    source: gitSourceOf(repo.remote),
    client: clientFor(svc, t),
    mode: 'apply',
    // An hour: anything applied within the test came from a webhook, not from the interval.
    intervalMs: 3_600_000,
    engine: { sourceId: 'platform', concurrency: 4 },
    listen: { host: '127.0.0.1', port: 0 },
    onListen: (u) => (url = u),
    webhookSecret: SECRET,
    elector,
  });
  const replica = { name, ctl, elector };
  replicas.push(replica);
  return replica;
}

const push = (body: string, headers: Record<string, string> = {}) => ({
  method: 'POST',
  headers: {
    'content-type': 'application/json',
    'x-github-event': 'push',
    'x-github-delivery': 'd-1',
    'x-hub-signature-256': signBody(SECRET, body),
    ...headers,
  },
  body,
});
const webhookCount = async (r: Replica, outcome: string) => {
  const text = await (await fetch(`${r.ctl.url}/metrics`)).text();
  const m = new RegExp(`^dpctl_controller_webhooks_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
};

async function pipelineSchedule(): Promise<string | undefined> {
  const projects = await svc.ok(t, 'GET', '/projects');
  const analytics = projects.data.find((p: any) => p.name === 'analytics');
  const list = await svc.ok(t, 'GET', `/projects/${analytics.id}/pipelines`, { query: { limit: 100 } });
  return list.data.find((x: any) => x.name === 'nightly-revenue')?.schedule;
}

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  repo = new TestRepo();
  repo.addExample('platform').commit('the platform');
  await ghost.acquire(new AbortController().signal);
});
afterAll(async () => {
  for (const r of replicas) {
    r.elector.holdRelease = false;
    await r.ctl.stop();
    await r.elector.release();
  }
  await ghost.release();
  repo?.close();
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a standby forwards webhooks and suspend/resume to the leader', () => {
  let leader: Replica;
  let standby: Replica;

  test('no leader known (the lock holder advertised no URL): the standby answers 503 in the error envelope', async () => {
    const a = await startReplica('replica-a');
    const b = await startReplica('replica-b');
    // Standbys stay ready, so the Service keeps sending them traffic.
    expect((await fetch(`${b.ctl.url}/readyz`)).status).toBe(200);
    const res = await fetch(`${b.ctl.url}/hooks/git`, push('{"ref":"refs/heads/main"}'));
    expect(res.status).toBe(503);
    const body = await res.json();
    expect(body).toEqual({ error: { code: 'no_leader', message: expect.stringContaining('no leader is reachable') } });
    expect(body.error.message).toContain('no leader is known');
    const suspend = await fetch(`${a.ctl.url}/suspend`, { method: 'POST', headers: { authorization: `Bearer ${SECRET}` } });
    expect(suspend.status).toBe(503);
    expect(a.ctl.status().controller.suspended).toBe(false);

    // The holder lets go: one replica leads and applies the first commit.
    await ghost.release();
    leader = await waitFor('a leader', () => replicas.find((r) => r.ctl.status().controller.leader.elected), 15_000);
    standby = replicas.find((r) => r !== leader)!;
    await waitFor(
      'the first commit applied',
      () => leader.ctl.status().last_run?.result === 'converged',
      60_000,
      () => leader.ctl.status().last_run,
    );
    expect(JSON.parse(readFileSync(`${lockPath}.leader.json`, 'utf8'))).toMatchObject({ identity: leader.name, url: leader.ctl.url });
  });

  test('a signed webhook sent to the standby is applied by the leader at once, despite an interval of an hour', async () => {
    const before = readFileSync(join(repo.work, 'platform/analytics/transform.yaml'), 'utf8');
    const rev = repo
      .write('platform/analytics/transform.yaml', before.replace('schedule: "0 2 * * *"', 'schedule: "0 5 * * *"'))
      .commit('pipeline at 5');
    const started = Date.now();
    const res = await fetch(`${standby.ctl.url}/hooks/git`, push(JSON.stringify({ ref: 'refs/heads/main', after: rev })));
    // The leader's own answer, passed back.
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ status: 'fetch scheduled' });
    await waitFor(
      `${rev.slice(0, 8)} applied by the leader`,
      () => leader.ctl.status().last_run?.revision === rev && leader.ctl.status().last_run?.result === 'converged',
      2_500,
      () => leader.ctl.status().last_run,
    );
    const elapsed = Date.now() - started;
    console.log(`webhook at the standby -> commit applied by the leader: ${elapsed} ms`);
    expect(await pipelineSchedule()).toBe('0 5 * * *');
    expect(leader.ctl.status().last_run?.trigger).toBe('webhook (push)');
    expect(await webhookCount(standby, 'forwarded')).toBe(1);
    expect(await webhookCount(leader, 'accepted')).toBe(1);
    // The standby itself never ran.
    expect(standby.ctl.status().runs).toBe(0);
  });

  test('a bad signature is refused 401 by the standby and not forwarded', async () => {
    const body = '{"ref":"refs/heads/main"}';
    const res = await fetch(`${standby.ctl.url}/hooks/git`, push(body, { 'x-hub-signature-256': signBody('not-the-secret', body) }));
    expect(res.status).toBe(401);
    expect((await res.json()).error.code).toBe('unauthorized');
    expect(await webhookCount(standby, 'unauthorized')).toBe(1);
    expect(await webhookCount(standby, 'forwarded')).toBe(1);
    expect(await webhookCount(leader, 'accepted')).toBe(1);
    expect(await webhookCount(leader, 'unauthorized')).toBe(0);
  });

  test('a request that was already forwarded is never forwarded again (loop protection); the leader accepts it', async () => {
    const body = '{"ref":"refs/heads/main"}';
    const res = await fetch(`${standby.ctl.url}/hooks/git`, push(body, { 'x-dpctl-forwarded': '1' }));
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ error: { code: 'no_leader', message: expect.stringContaining('already forwarded once') } });
    expect(await webhookCount(leader, 'accepted')).toBe(1);
    expect(await webhookCount(standby, 'forwarded')).toBe(1);

    const atLeader = await fetch(`${leader.ctl.url}/hooks/git`, push(body, { 'x-dpctl-forwarded': '1' }));
    expect(atLeader.status).toBe(202);
    expect(await webhookCount(leader, 'accepted')).toBe(2);
  });

  test('suspend and resume sent to the standby apply to the leader; the standby keeps its own flag; a wrong token is refused there', async () => {
    const control = (r: Replica, path: string, token = SECRET) =>
      fetch(`${r.ctl.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect((await control(standby, '/suspend', 'wrong')).status).toBe(401);
    expect(leader.ctl.status().controller.suspended).toBe(false);

    const suspended = await control(standby, '/suspend');
    expect(suspended.status).toBe(200);
    expect(await suspended.json()).toEqual({ suspended: true });
    expect(leader.ctl.status().controller.suspended).toBe(true);
    expect(standby.ctl.status().controller.suspended).toBe(false);

    const resumed = await control(standby, '/resume');
    expect(await resumed.json()).toEqual({ suspended: false });
    expect(leader.ctl.status().controller.suspended).toBe(false);
  });

  test('leader gone and no new leader yet: 503 naming no reachable leader; once the standby leads, it handles webhooks itself', async () => {
    const refusedBefore = await webhookCount(standby, 'no_leader');
    // The leader's listener closes while its lock stays fresh: the published URL names a dead replica.
    leader.elector.holdRelease = true;
    await leader.ctl.stop();
    const body = '{"ref":"refs/heads/main"}';
    const res = await fetch(`${standby.ctl.url}/hooks/git`, push(body));
    expect(res.status).toBe(503);
    const error = (await res.json()).error;
    expect(error.code).toBe('no_leader');
    expect(error.message).toMatch(/no leader is reachable: .*forwarding to the leader failed \(ECONNREFUSED\)/);
    expect(await webhookCount(standby, 'no_leader')).toBe(refusedBefore + 1);

    // The lock is let go: the standby takes over, runs, and answers webhooks itself.
    leader.elector.holdRelease = false;
    await leader.elector.release();
    await waitFor('the standby leads', () => standby.ctl.status().controller.leader.elected, 15_000);
    expect(JSON.parse(readFileSync(`${lockPath}.leader.json`, 'utf8'))).toMatchObject({ identity: standby.name, url: standby.ctl.url });
    const own = await fetch(`${standby.ctl.url}/hooks/git`, push(body));
    expect(own.status).toBe(202);
    expect(await webhookCount(standby, 'accepted')).toBe(1);
    await waitFor(
      'a run triggered by the webhook',
      () => standby.ctl.status().last_run?.trigger === 'webhook (push)',
      30_000,
      () => standby.ctl.status().last_run,
    );
  });
});

describe('the relay itself (against a plain HTTP server standing for the leader)', () => {
  test('passes the raw body, the signature and GitHub headers with the loop header, and nothing else; returns the answer as it is', async () => {
    let seen: { headers: IncomingHttpHeaders; body: string; url?: string } | undefined;
    const leaderStandIn = createServer(async (req, res) => {
      let body = '';
      for await (const chunk of req) body += chunk;
      seen = { headers: req.headers, body, url: req.url };
      res.writeHead(409, { 'content-type': 'application/problem+json' });
      res.end('{"error":{"code":"x","message":"y"}}');
    });
    await new Promise<void>((r) => leaderStandIn.listen(0, '127.0.0.1', r));
    try {
      const body = Buffer.from('{"ref":"refs/heads/main","zero":"\u0000"}');
      const answer = await relayToLeader(`http://127.0.0.1:${(leaderStandIn.address() as AddressInfo).port}/`, '/hooks/git', body, {
        'content-type': 'application/json',
        'x-hub-signature-256': signBody(SECRET, body),
        'x-github-event': 'push',
        'x-github-delivery': 'abc',
        authorization: `Bearer ${SECRET}`,
        cookie: 'session=not-for-the-leader',
        'x-forwarded-for': '203.0.113.9',
      });
      expect(answer).toEqual({ status: 409, contentType: 'application/problem+json', body: '{"error":{"code":"x","message":"y"}}' });
      expect(seen!.url).toBe('/hooks/git');
      expect(seen!.body).toBe(body.toString());
      expect(seen!.headers).toMatchObject({
        [FORWARDED_HEADER]: '1',
        'x-hub-signature-256': signBody(SECRET, body),
        'x-github-event': 'push',
        'x-github-delivery': 'abc',
        'content-type': 'application/json',
      });
      // The secret as a bearer token never goes to an address read from the election.
      expect(seen!.headers.authorization).toBeUndefined();
      expect(seen!.headers.cookie).toBeUndefined();
      expect(seen!.headers['x-forwarded-for']).toBeUndefined();
    } finally {
      leaderStandIn.close();
    }
  });

  test('a leader that does not answer in time fails the relay with a short reason', async () => {
    const hung = createServer(() => {});
    await new Promise<void>((r) => hung.listen(0, '127.0.0.1', r));
    try {
      const started = Date.now();
      const err = await relayToLeader(
        `http://127.0.0.1:${(hung.address() as AddressInfo).port}`,
        '/hooks/git',
        Buffer.from('{}'),
        {},
        300,
      ).catch((e: unknown) => e);
      expect(relayFailure(err)).toBe('the leader did not answer in time');
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      hung.closeAllConnections();
      hung.close();
    }
  });
});
