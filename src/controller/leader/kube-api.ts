import { readFile } from 'node:fs/promises';
import { Agent, request, type Dispatcher } from 'undici';
import { LeaderElectionError } from './shared.js';

/** The fields of a coordination.k8s.io/v1 Lease that leader election reads and writes. */
export interface Lease {
  apiVersion: 'coordination.k8s.io/v1';
  kind: 'Lease';
  metadata: { name: string; namespace: string; resourceVersion?: string; annotations?: Record<string, string>; [key: string]: unknown };
  spec?: {
    holderIdentity?: string | null;
    leaseDurationSeconds?: number | null;
    /** MicroTime: RFC 3339 with exactly six fractional digits. */
    acquireTime?: string | null;
    renewTime?: string | null;
    leaseTransitions?: number | null;
    [key: string]: unknown;
  };
}

/** Where the in-cluster API is; each part can be overridden (tests, out-of-cluster runs). */
export interface KubeApiOptions {
  /** Default: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT */
  server?: string;
  /** Default: /var/run/secrets/kubernetes.io/serviceaccount/token (read per request: projected tokens rotate). */
  tokenFile?: string;
  /** Default: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt */
  caFile?: string;
  /** Cap of one request (default 5 s): a hung renewal must not outlive the lease. */
  timeoutMs?: number;
}

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** `https://host:port` of the in-cluster API server, or a clear error outside a cluster. */
export function inClusterServer(env: NodeJS.ProcessEnv = process.env): string {
  const host = env.KUBERNETES_SERVICE_HOST?.trim();
  const port = env.KUBERNETES_SERVICE_PORT?.trim() || '443';
  if (!host) {
    throw new LeaderElectionError(
      '--leader-election lease runs inside a Kubernetes cluster, but KUBERNETES_SERVICE_HOST is not set; use --leader-election lock (local) or none',
    );
  }
  // An IPv6 service address needs brackets in a URL.
  return `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** The outcome of a write guarded by metadata.resourceVersion. */
export type WriteResult = { ok: true; lease: Lease } | { ok: false; conflict: true };

/**
 * Just enough of the Kubernetes API for one Lease: GET, POST (create) and PUT (replace with
 * optimistic concurrency: 409 Conflict when someone else wrote it since we read it).
 */
export class LeaseApi {
  private readonly server: string;
  private readonly tokenFile: string;
  private readonly caFile: string;
  private readonly timeoutMs: number;
  private dispatcher: Promise<Dispatcher> | undefined;

  constructor(
    readonly namespace: string,
    readonly name: string,
    options: KubeApiOptions = {},
  ) {
    this.server = (options.server ?? inClusterServer()).replace(/\/+$/, '');
    this.tokenFile = options.tokenFile ?? `${SERVICE_ACCOUNT_DIR}/token`;
    this.caFile = options.caFile ?? `${SERVICE_ACCOUNT_DIR}/ca.crt`;
    this.timeoutMs = options.timeoutMs ?? 5_000;
  }

  private get collection() {
    return `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.namespace)}/leases`;
  }

  async get(): Promise<Lease | undefined> {
    const res = await this.send('GET', `${this.collection}/${encodeURIComponent(this.name)}`);
    if (res.status === 404) return undefined;
    return this.expect(res, 'get', [200]);
  }

  async create(lease: Lease): Promise<WriteResult> {
    const res = await this.send('POST', this.collection, lease);
    // 409 AlreadyExists: another replica created it first.
    if (res.status === 409) return { ok: false, conflict: true };
    return { ok: true, lease: await this.expect(res, 'create', [200, 201]) };
  }

  async replace(lease: Lease): Promise<WriteResult> {
    const res = await this.send('PUT', `${this.collection}/${encodeURIComponent(this.name)}`, lease);
    // 409: our resourceVersion is outdated; 404: deleted meanwhile. Either way someone else acted first.
    if (res.status === 409 || res.status === 404) return { ok: false, conflict: true };
    return { ok: true, lease: await this.expect(res, 'update', [200]) };
  }

  async close() {
    const dispatcher = await this.dispatcher?.catch(() => undefined);
    this.dispatcher = undefined;
    await dispatcher?.close();
  }

  private agent(): Promise<Dispatcher> {
    this.dispatcher ??= readFile(this.caFile, 'utf8').then(
      (ca) => new Agent({ connect: { ca }, connections: 2 }),
      (err: NodeJS.ErrnoException) => {
        this.dispatcher = undefined;
        throw new LeaderElectionError(`cannot read the Kubernetes API CA ${this.caFile}: ${err.message}`);
      },
    );
    return this.dispatcher;
  }

  private async token(): Promise<string> {
    try {
      return (await readFile(this.tokenFile, 'utf8')).trim();
    } catch (err) {
      throw new LeaderElectionError(`cannot read the service account token ${this.tokenFile}: ${(err as Error).message}`);
    }
  }

  private async send(method: 'GET' | 'POST' | 'PUT', path: string, body?: Lease) {
    const [dispatcher, token] = await Promise.all([this.agent(), this.token()]);
    const res = await request(`${this.server}${path}`, {
      method,
      dispatcher,
      headers: { authorization: `Bearer ${token}`, accept: 'application/json', ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    return { status: res.statusCode, text: await res.body.text() };
  }

  /** The Lease from a successful answer; otherwise an error naming the request and the API's own message. */
  private async expect(res: { status: number; text: string }, verb: string, ok: number[]): Promise<Lease> {
    if (ok.includes(res.status)) return JSON.parse(res.text) as Lease;
    let message = res.text.slice(0, 300);
    try {
      message = (JSON.parse(res.text) as { message?: string }).message ?? message;
    } catch {
      // Not a Status object (a proxy's page): keep the text.
    }
    const what = `${verb} lease ${this.namespace}/${this.name}`;
    if (res.status === 401 || res.status === 403) {
      throw new LeaderElectionError(
        `Kubernetes API refused to ${what} (${res.status}): ${message}. The controller's ServiceAccount needs get, create and update on leases.coordination.k8s.io in namespace ${this.namespace} (see controller/deploy/rbac.yaml)`,
      );
    }
    throw new KubeApiError(`Kubernetes API failed to ${what} (${res.status}): ${message}`, res.status);
  }
}

/** A failure worth retrying (5xx, 429, unexpected answers). */
export class KubeApiError extends Error {
  override name = 'KubeApiError';
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}
