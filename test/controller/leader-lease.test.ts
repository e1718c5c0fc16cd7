import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Lease as LeaseModel } from 'kubernetes-models/coordination.k8s.io/v1/Lease';
import { loadOrCreateTls } from '../../src/service/tls.js';
import {
  createElector,
  LEADER_URL_ANNOTATION,
  LeaderElectionError,
  LeaseApi,
  type LeaderElector,
} from '../../src/controller/leader/index.js';
import { LeaseSuspensionStore, SUSPENDED_ANNOTATION } from '../../src/controller/suspension.js';
import type { Lease } from '../../src/controller/leader/kube-api.js';

/**
 * The `lease` elector against an in-test HTTPS server that implements the three calls of the
 * Kubernetes API it uses (GET, POST, PUT of one coordination.k8s.io/v1 Lease) with the API
 * server's rules: bearer tokens, resourceVersion checks (409 Conflict), AlreadyExists (409),
 * schema validation (kubernetes-models) and MicroTime's six fractional digits.
 * It is not a real cluster (there is none on this machine).
 */
const NAMESPACE = 'dpctl';
const NAME = 'dpctl-controller';
const LEASE_SECONDS = 3;
const COLLECTION = `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases`;

interface Write {
  method: 'POST' | 'PUT';
  status: number;
  at: number;
  holder: string | null | undefined;
  /** The lease as it was before this write. */
  before: Lease['spec'] | undefined;
}

class FakeKubeApi {
  lease: Lease | undefined;
  private resourceVersion = 100;
  readonly writes: Write[] = [];
  /** token -> who; tokens not listed get 401. */
  readonly tokens = new Map<string, string>();
  /** Answers 503 to these callers (a partitioned replica), 403 to the forbidden ones. */
  readonly unavailable = new Set<string>();
  readonly forbidden = new Set<string>();
  /** Holds GET answers until this many GETs arrived, so that racing replicas read the same version. */
  private heldGets: Array<() => void> = [];
  private barrier = 0;

  constructor(readonly server: Server) {
    server.on('request', (req, res) => this.handle(req, res));
  }

  holdGets(count: number) {
    this.barrier = count;
  }

  preset(spec: Lease['spec']) {
    this.lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: NAME, namespace: NAMESPACE, resourceVersion: String(++this.resourceVersion) },
      spec,
    };
  }

  private status(res: ServerResponse, code: number, reason: string, message: string) {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason, message, code }));
  }

  private send(res: ServerResponse, code: number, lease: Lease) {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(lease));
  }

  private async handle(req: IncomingMessage, res: ServerResponse) {
    let text = '';
    for await (const chunk of req) text += chunk;
    const caller = this.tokens.get((req.headers.authorization ?? '').replace(/^Bearer /, ''));
    if (!caller) return this.status(res, 401, 'Unauthorized', 'Unauthorized');
    if (this.forbidden.has(caller)) {
      return this.status(
        res,
        403,
        'Forbidden',
        `leases.coordination.k8s.io "${NAME}" is forbidden: User "system:serviceaccount:${NAMESPACE}:${caller}" cannot get resource "leases"`,
      );
    }
    if (this.unavailable.has(caller))
      return this.status(res, 503, 'ServiceUnavailable', 'the server is currently unable to handle the request');
    const item = `${COLLECTION}/${NAME}`;

    if (req.method === 'GET' && req.url === item) {
      if (this.barrier > 0) {
        await new Promise<void>((resolve) => {
          this.heldGets.push(resolve);
          if (this.heldGets.length >= this.barrier) {
            this.barrier = 0;
            for (const release of this.heldGets.splice(0)) release();
          }
        });
      }
      return this.lease
        ? this.send(res, 200, this.lease)
        : this.status(res, 404, 'NotFound', `leases.coordination.k8s.io "${NAME}" not found`);
    }
    if ((req.method === 'POST' && req.url === COLLECTION) || (req.method === 'PUT' && req.url === item)) {
      const body = JSON.parse(text) as Lease;
      const invalid = this.invalid(body);
      if (invalid) return this.status(res, 422, 'Invalid', invalid);
      const before = this.lease?.spec;
      const record = (status: number) =>
        this.writes.push({ method: req.method as 'POST' | 'PUT', status, at: Date.now(), holder: body.spec?.holderIdentity, before });
      if (req.method === 'POST') {
        if (this.lease) {
          record(409);
          return this.status(res, 409, 'AlreadyExists', `leases.coordination.k8s.io "${NAME}" already exists`);
        }
      } else {
        if (!this.lease) return this.status(res, 404, 'NotFound', `leases.coordination.k8s.io "${NAME}" not found`);
        if (body.metadata.resourceVersion !== this.lease.metadata.resourceVersion) {
          record(409);
          return this.status(
            res,
            409,
            'Conflict',
            `Operation cannot be fulfilled on leases.coordination.k8s.io "${NAME}": the object has been modified; please apply your changes to the latest version and try again`,
          );
        }
      }
      // Like the API server: drop nulls (holderIdentity: null clears the field), stamp a new version.
      const spec = Object.fromEntries(Object.entries(body.spec ?? {}).filter(([, v]) => v !== null));
      this.lease = { ...body, metadata: { ...body.metadata, resourceVersion: String(++this.resourceVersion) }, spec };
      record(req.method === 'POST' ? 201 : 200);
      return this.send(res, req.method === 'POST' ? 201 : 200, this.lease);
    }
    return this.status(res, 404, 'NotFound', `no route ${req.method} ${req.url}`);
  }

  /** What the API server would refuse: schema errors, a wrong name, MicroTime without six fractional digits. */
  private invalid(body: Lease): string | undefined {
    try {
      new LeaseModel(body as never).validate();
    } catch (err) {
      return (err as Error).message;
    }
    if (body.metadata?.name !== NAME || body.metadata?.namespace !== NAMESPACE) return 'metadata.name/namespace do not match the request';
    for (const field of ['acquireTime', 'renewTime'] as const) {
      const value = body.spec?.[field];
      if (value != null && !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(value))
        return `spec.${field}: cannot parse "${value}" as MicroTime`;
    }
    return undefined;
  }
}

const dir = mkdtempSync(join(tmpdir(), 'dpctl-leader-lease-'));
let api: FakeKubeApi;
let server: string;
let caFile: string;
const electors: LeaderElector[] = [];
const logs: string[] = [];

function elector(identity: string, advertise?: string): LeaderElector {
  const tokenFile = join(dir, `token-${identity}`);
  writeFileSync(tokenFile, `token-of-${identity}\n`);
  api.tokens.set(`token-of-${identity}`, identity);
  const e = createElector(
    { kind: 'lease', namespace: NAMESPACE, name: NAME, identity, leaseSeconds: LEASE_SECONDS, advertise },
    { kubeApi: { server, tokenFile, caFile, timeoutMs: 2_000 }, log: (m) => logs.push(`${identity}: ${m}`) },
  );
  electors.push(e);
  return e;
}

const apis: LeaseApi[] = [];
/** The suspension store a replica's controller uses (start.ts): the annotation on the same Lease. */
function suspensionStore(identity: string): LeaseSuspensionStore {
  const tokenFile = join(dir, `token-${identity}`);
  writeFileSync(tokenFile, `token-of-${identity}\n`);
  api.tokens.set(`token-of-${identity}`, identity);
  const leaseApi = new LeaseApi(NAMESPACE, NAME, { server, tokenFile, caFile, timeoutMs: 2_000 });
  apis.push(leaseApi);
  return new LeaseSuspensionStore(leaseApi);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const never = () => new AbortController().signal;
async function until(condition: () => boolean, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; log: ${logs.join(' | ')}`);
    await sleep(20);
  }
}

beforeAll(async () => {
  const tls = await loadOrCreateTls({ dataDir: dir });
  caFile = tls.certPath;
  const https = createServer({ cert: tls.cert, key: tls.key });
  api = new FakeKubeApi(https);
  await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
  server = `https://localhost:${(https.address() as AddressInfo).port}`;
});

afterEach(async () => {
  await Promise.all(electors.splice(0).map((e) => e.release()));
  await Promise.all(apis.splice(0).map((a) => a.close()));
  api.lease = undefined;
  api.writes.length = 0;
  api.unavailable.clear();
  api.forbidden.clear();
  logs.length = 0;
});

afterAll(async () => {
  await new Promise((resolve) => api.server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

describe('Lease leader election (against an in-test Kubernetes API, not a real cluster)', () => {
  it('creates the missing Lease: of two racing replicas exactly one wins (409 AlreadyExists for the other) and keeps renewing', async () => {
    const a = elector('pod-a');
    const b = elector('pod-b');
    api.holdGets(2); // both read "not found" before either creates it
    const won = await Promise.race([a.acquire(never()).then(() => a), b.acquire(never()).then(() => b)]);
    const lost = won === a ? b : a;
    await until(() => api.writes.length >= 2, 2_000, 'the second create');
    expect(
      api.writes
        .filter((w) => w.method === 'POST')
        .map((w) => w.status)
        .sort(),
    ).toEqual([201, 409]);
    expect(api.lease?.spec).toMatchObject({ holderIdentity: won.identity, leaseDurationSeconds: LEASE_SECONDS, leaseTransitions: 0 });
    const firstRenew = api.lease!.spec!.renewTime!;

    // Two lease durations later: still the same leader, renewed (renewTime moved), the other waiting.
    await sleep(LEASE_SECONDS * 2000);
    expect(won.isLeader()).toBe(true);
    expect(lost.isLeader()).toBe(false);
    expect(api.lease?.spec?.holderIdentity).toBe(won.identity);
    expect(Date.parse(api.lease!.spec!.renewTime!)).toBeGreaterThan(Date.parse(firstRenew));
    expect(api.lease?.spec?.leaseTransitions).toBe(0);
    expect(won.description).toBe(`lease ${NAMESPACE}/${NAME}`);
  });

  it('takes over a Lease nobody holds: the replica whose update carries an outdated resourceVersion gets 409 and stays standby', async () => {
    const old = new Date(Date.now() - 60_000).toISOString().replace('Z', '000Z');
    api.preset({ leaseDurationSeconds: 1, acquireTime: old, renewTime: old, leaseTransitions: 4 });
    const a = elector('pod-a');
    const b = elector('pod-b');
    api.holdGets(2); // both read the same resourceVersion, both try to update it
    const won = await Promise.race([a.acquire(never()).then(() => a), b.acquire(never()).then(() => b)]);
    await until(() => api.writes.length >= 2, 2_000, 'the second update');
    const [first, second] = api.writes.filter((w) => w.method === 'PUT');
    expect([first.status, second.status].sort()).toEqual([200, 409]);
    expect(first.before?.holderIdentity).toBeUndefined();
    expect(api.lease?.spec).toMatchObject({ holderIdentity: won.identity, leaseDurationSeconds: LEASE_SECONDS, leaseTransitions: 5 });
    expect(Date.parse(api.lease!.spec!.acquireTime!)).toBeGreaterThan(Date.parse(old));
    expect([a, b].filter((e) => e.isLeader())).toEqual([won]);
  });

  // Like client-go: expiry is "this version has not changed for leaseDurationSeconds on my clock",
  // never "renewTime + duration < my clock", so a holder whose clock is off cannot lose (or keep) the lease early.
  for (const [skew, offsetMs] of [
    ['an hour behind', -3_600_000],
    ['an hour ahead', 3_600_000],
  ] as const) {
    it(`takes over a dead holder's Lease after one lease duration of no change on its own clock (holder's clock ${skew})`, async () => {
      const stamp = new Date(Date.now() + offsetMs).toISOString().replace('Z', '000Z');
      api.preset({
        holderIdentity: 'pod-gone',
        leaseDurationSeconds: LEASE_SECONDS,
        acquireTime: stamp,
        renewTime: stamp,
        leaseTransitions: 4,
      });
      const a = elector('pod-a');
      const startedAt = Date.now();
      let leadsAt = 0;
      const acquired = a.acquire(never()).then(() => (leadsAt = Date.now()));
      await sleep(LEASE_SECONDS * 1000 - 500);
      expect(leadsAt).toBe(0);
      expect(api.writes).toEqual([]);
      await acquired;
      expect(leadsAt - startedAt).toBeGreaterThanOrEqual(LEASE_SECONDS * 1000);
      expect(leadsAt - startedAt).toBeLessThan(LEASE_SECONDS * 1000 + 2_000);
      expect(api.lease?.spec).toMatchObject({ holderIdentity: 'pod-a', leaseTransitions: 5 });
      expect(
        logs.some((l) =>
          l.startsWith(`pod-a: leader election: took over lease ${NAMESPACE}/${NAME} from pod-gone (not renewed for ${LEASE_SECONDS} s)`),
        ),
      ).toBe(true);
    });
  }

  it('does not take a Lease that is held and fresh, and takes it over only after it expired when the leader stopped renewing', async () => {
    const a = elector('pod-a');
    await a.acquire(never());
    let aLostAt = 0;
    a.onLost(() => (aLostAt = Date.now()));
    const b = elector('pod-b');
    let bLeadsAt = 0;
    const bAcquired = b.acquire(never()).then(() => (bLeadsAt = Date.now()));
    await sleep(LEASE_SECONDS * 1000 + 500);
    expect(bLeadsAt).toBe(0);

    // pod-a is cut off from the API (its renewals get 503): it steps down, and pod-b takes over once the lease expired.
    api.unavailable.add('pod-a');
    const lastRenewal = Date.parse(api.lease!.spec!.renewTime!);
    await bAcquired;
    expect(aLostAt).toBeGreaterThan(0);
    expect(a.isLeader()).toBe(false);
    // a stepped down (2/3 of the lease without renewal) before b could take over (the full lease).
    expect(aLostAt).toBeLessThan(bLeadsAt);
    expect(aLostAt - lastRenewal).toBeLessThan(LEASE_SECONDS * 1000);
    expect(bLeadsAt).toBeGreaterThanOrEqual(lastRenewal + LEASE_SECONDS * 1000);
    const takeover = api.writes.find((w) => w.status === 200 && w.holder === 'pod-b')!;
    expect(takeover.before?.holderIdentity).toBe('pod-a');
    expect(api.lease?.spec).toMatchObject({ holderIdentity: 'pod-b', leaseTransitions: 1 });
    expect(logs.some((l) => l.startsWith('pod-a: leader election: could not renew'))).toBe(true);
    expect(logs.some((l) => l.startsWith('pod-b: leader election: took over'))).toBe(true);
  });

  it('release() clears the holder so a standby takes over at once, without waiting for the lease to expire', async () => {
    const a = elector('pod-a');
    await a.acquire(never());
    const b = elector('pod-b');
    let bLeadsAt = 0;
    const bAcquired = b.acquire(never()).then(() => (bLeadsAt = Date.now()));
    await sleep(500);
    let lost = false;
    a.onLost(() => (lost = true));
    const lastRenewal = Date.parse(api.lease!.spec!.renewTime!);
    await a.release();
    expect(a.isLeader()).toBe(false);
    expect(api.lease?.spec?.holderIdentity).toBeUndefined();
    expect(api.lease?.spec?.leaseDurationSeconds).toBe(1);
    await bAcquired;
    // Before a's last renewal would have run out: the handover came from the release.
    expect(bLeadsAt).toBeLessThan(lastRenewal + LEASE_SECONDS * 1000);
    expect(lost).toBe(false); // giving it up is not losing it
    const takeover = api.writes.find((w) => w.status === 200 && w.holder === 'pod-b')!;
    expect(takeover.before?.holderIdentity).toBeUndefined();
    expect(api.lease?.spec).toMatchObject({ holderIdentity: 'pod-b', leaseDurationSeconds: LEASE_SECONDS, leaseTransitions: 1 });
  });

  it('publishes the leader URL in an annotation on create, takeover and renewal, clears it on release; standbys read it; an expired Lease has none', async () => {
    // Read through functions: the test mutates api.lease, which TypeScript would otherwise narrow.
    const annotations = () => api.lease?.metadata.annotations;
    const annotation = () => annotations()?.[LEADER_URL_ANNOTATION];
    const observer = elector('pod-observer'); // never acquires: reads like a standby

    // An expired Lease whose annotation names a dead leader: nobody to forward to.
    const old = new Date(Date.now() - 60_000).toISOString().replace('Z', '000Z');
    api.preset({ holderIdentity: 'pod-gone', leaseDurationSeconds: LEASE_SECONDS, acquireTime: old, renewTime: old, leaseTransitions: 2 });
    api.lease!.metadata.annotations = { [LEADER_URL_ANNOTATION]: 'http://10.0.0.9:9090', 'example.com/owner': 'platform-team' };
    expect(await observer.leaderUrl()).toBeUndefined();

    // Takeover: our URL replaces the dead one, other annotations stay.
    const a = elector('pod-a', 'http://10.0.0.1:9090');
    await a.acquire(never());
    expect(annotations()).toEqual({ [LEADER_URL_ANNOTATION]: 'http://10.0.0.1:9090', 'example.com/owner': 'platform-team' });
    expect(await observer.leaderUrl()).toBe('http://10.0.0.1:9090');
    expect(await a.leaderUrl()).toBe('http://10.0.0.1:9090');

    // Renewals keep it (each PUT replaces the whole object).
    const writes = api.writes.length;
    await until(() => api.writes.length >= writes + 2, LEASE_SECONDS * 1000 * 2, 'two renewals');
    expect(annotation()).toBe('http://10.0.0.1:9090');

    // Release clears it with the holder: a standby then has nobody to forward to.
    await a.release();
    expect(api.lease?.spec?.holderIdentity).toBeUndefined();
    expect(annotations()).toEqual({ 'example.com/owner': 'platform-team' });
    expect(await observer.leaderUrl()).toBeUndefined();

    // The next leader publishes its own.
    const b = elector('pod-b', 'http://10.0.0.2:9090');
    await b.acquire(never());
    expect(await observer.leaderUrl()).toBe('http://10.0.0.2:9090');

    // Creating the Lease publishes the URL too.
    await b.release();
    api.lease = undefined;
    const c = elector('pod-c', 'http://10.0.0.3:9090');
    await c.acquire(never());
    expect(api.writes.at(-1)).toMatchObject({ method: 'POST', status: 201, holder: 'pod-c' });
    expect(annotations()).toEqual({ [LEADER_URL_ANNOTATION]: 'http://10.0.0.3:9090' });
    expect(await observer.leaderUrl()).toBe('http://10.0.0.3:9090');

    // A leader without an advertised URL publishes none.
    await c.release();
    const d = elector('pod-d');
    await d.acquire(never());
    expect(api.writes.at(-1)).toMatchObject({ method: 'PUT', status: 200, holder: 'pod-d' });
    expect(annotations()).toBeUndefined();
    expect(await observer.leaderUrl()).toBeUndefined();
  });

  it('keeps the suspension in an annotation: renewals keep it, a write racing a renewal is retried (409), the next leader reads it after a takeover', async () => {
    const annotations = () => api.lease?.metadata.annotations;
    const a = elector('pod-a', 'http://10.0.0.1:9090');
    await a.acquire(never());
    let aLost = false;
    a.onLost(() => (aLost = true));
    const storeA = suspensionStore('pod-a');
    expect(await storeA.load()).toBeUndefined();
    await storeA.save(true);
    expect(annotations()).toEqual({ [LEADER_URL_ANNOTATION]: 'http://10.0.0.1:9090', [SUSPENDED_ANNOTATION]: 'true' });

    // Renewals re-read the Lease and keep annotations they do not own.
    let writes = api.writes.length;
    await until(() => api.writes.filter((w, i) => i >= writes && w.status === 200).length >= 2, LEASE_SECONDS * 2000, 'two renewals');
    expect(annotations()?.[SUSPENDED_ANNOTATION]).toBe('true');
    // Saving the value it has already writes nothing (the version standbys watch stays).
    writes = api.writes.length;
    await storeA.save(true);
    expect(api.writes.length).toBe(writes);

    // A save and a renewal read the same version: one of them gets 409 and retries; both land, nobody steps down.
    api.holdGets(2);
    const renewTime = api.lease!.spec!.renewTime!;
    await storeA.save(false);
    await until(() => api.writes.some((w, i) => i >= writes && w.status === 409), LEASE_SECONDS * 1000, 'the conflicting write');
    await until(() => api.lease!.spec!.renewTime! !== renewTime, LEASE_SECONDS * 1000, 'the renewal');
    await until(() => api.writes.filter((w, i) => i >= writes && w.status === 200).length >= 3, LEASE_SECONDS * 2000, 'one more renewal');
    expect(annotations()).toEqual({ [LEADER_URL_ANNOTATION]: 'http://10.0.0.1:9090', [SUSPENDED_ANNOTATION]: 'false' });
    expect(a.isLeader()).toBe(true);
    expect(aLost).toBe(false);
    expect(logs.filter((l) => l.includes('stepping down'))).toEqual([]);

    // The leader is cut off from the API and a standby takes over: it reads what the old leader saved.
    await storeA.save(true);
    const b = elector('pod-b', 'http://10.0.0.2:9090');
    const storeB = suspensionStore('pod-b');
    const bAcquired = b.acquire(never());
    api.unavailable.add('pod-a');
    await bAcquired;
    expect(api.lease?.spec).toMatchObject({ holderIdentity: 'pod-b', leaseTransitions: 1 });
    expect(await storeB.load()).toBe(true);
    expect(annotations()).toEqual({ [LEADER_URL_ANNOTATION]: 'http://10.0.0.2:9090', [SUSPENDED_ANNOTATION]: 'true' });

    // A save just before release: the release's write conflicts, reads again and still clears the holder (the annotation stays).
    await storeB.save(false);
    await b.release();
    expect(api.writes.slice(-2).map((w) => [w.status, w.holder ?? null])).toEqual([
      [409, null],
      [200, null],
    ]);
    expect(api.lease?.spec?.holderIdentity).toBeUndefined();
    expect(annotations()).toEqual({ [SUSPENDED_ANNOTATION]: 'false' });
  });

  it('a suspension saved before any replica leads creates the Lease with the annotation and no holder; the first leader takes it as it is', async () => {
    const store = suspensionStore('pod-a');
    await store.save(true);
    expect(api.lease?.metadata.annotations).toEqual({ [SUSPENDED_ANNOTATION]: 'true' });
    expect(api.lease?.spec?.holderIdentity).toBeUndefined();
    const a = elector('pod-a', 'http://10.0.0.1:9090');
    await a.acquire(never());
    expect(api.lease?.spec).toMatchObject({ holderIdentity: 'pod-a' });
    expect(api.lease?.metadata.annotations).toEqual({ [SUSPENDED_ANNOTATION]: 'true', [LEADER_URL_ANNOTATION]: 'http://10.0.0.1:9090' });
    expect(await store.load()).toBe(true);
  });

  it('fails with a clear error when RBAC forbids the Lease, outside a cluster, and on abort', async () => {
    const a = elector('pod-a');
    api.forbidden.add('pod-a');
    const err = await a.acquire(never()).catch((e: Error) => e);
    expect(err).toBeInstanceOf(LeaderElectionError);
    expect((err as Error).message).toContain(`Kubernetes API refused to get lease ${NAMESPACE}/${NAME} (403)`);
    expect((err as Error).message).toContain('needs get, create and update on leases.coordination.k8s.io');

    const env = { ...process.env };
    delete process.env.KUBERNETES_SERVICE_HOST;
    try {
      expect(() => createElector({ kind: 'lease', namespace: NAMESPACE, name: NAME })).toThrow(/KUBERNETES_SERVICE_HOST is not set/);
    } finally {
      process.env = env;
    }

    // A standby waiting for a held lease stops when aborted.
    const b = elector('pod-b');
    await b.acquire(never());
    const c = elector('pod-c');
    const abort = new AbortController();
    const waiting = c.acquire(abort.signal);
    await sleep(300);
    abort.abort();
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' });
    expect(c.isLeader()).toBe(false);
  });
});
