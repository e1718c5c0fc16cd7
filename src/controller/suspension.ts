import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Lease, WriteResult } from './leader/kube-api.js';
import { readIfPresent } from '../client/token-store.js';

/**
 * Where the controller keeps "reconciling is suspended", so that it survives a restart and a
 * change of leader (controller.ts loads it on start and whenever this replica becomes leader,
 * and saves it on every suspend and resume). Which store goes with which election: start.ts.
 */
export interface SuspensionStore {
  /** For logs: the file, or the Lease. */
  readonly description: string;
  /** The stored value; undefined when nothing was ever stored. */
  load(): Promise<boolean | undefined>;
  save(suspended: boolean): Promise<void>;
}

/**
 * A JSON file `{"suspended":true,"at":"...","by":"..."}`: `<state-dir>/suspended.json` for a single
 * replica, `<lock-file>.suspended.json` for replicas that share a lock on one host. Written to a
 * temporary file and renamed, so a reader never sees half of it.
 */
export class FileSuspensionStore implements SuspensionStore {
  readonly description: string;
  constructor(
    readonly path: string,
    private readonly identity?: string,
  ) {
    this.description = `file ${path}`;
  }

  async load(): Promise<boolean | undefined> {
    const text = await readIfPresent(this.path);
    if (text === undefined) return undefined;
    let value: unknown;
    try {
      value = (JSON.parse(text) as { suspended?: unknown }).suspended;
    } catch {
      throw new Error(`${this.path} is not JSON: ${JSON.stringify(text.slice(0, 80))}`);
    }
    return typeof value === 'boolean' ? value : undefined;
  }

  async save(suspended: boolean): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true });
    const temporary = `${this.path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    const body = { suspended, at: new Date().toISOString(), ...(this.identity ? { by: this.identity } : {}) };
    await writeFile(temporary, `${JSON.stringify(body)}\n`, { mode: 0o600 });
    await rename(temporary, this.path);
  }
}

/** The Lease annotation that holds the suspension (`"true"` / `"false"`), next to `dpctl.dev/leader-url`. */
export const SUSPENDED_ANNOTATION = 'dpctl.dev/suspended';

/** The calls of the Lease API the store uses (LeaseApi in leader/kube-api.ts). */
export interface LeaseAccess {
  readonly namespace: string;
  readonly name: string;
  get(): Promise<Lease | undefined>;
  create(lease: Lease): Promise<WriteResult>;
  replace(lease: Lease): Promise<WriteResult>;
}

/**
 * The suspension as an annotation on the leader election's Lease, so every replica (and the
 * next leader) reads the same value. A write reads the Lease and puts it back with the
 * annotation and the resourceVersion it read; when a renewal wrote in between, the API server
 * answers 409 and the write is retried on a fresh read (and a renewal that loses the race to
 * this write retries the same way). Renewals re-read the Lease and keep every annotation they
 * do not own, so they never erase it. A missing Lease is created with the annotation and no
 * holder: the first replica to elect itself takes it over as it is.
 */
export class LeaseSuspensionStore implements SuspensionStore {
  readonly description: string;
  constructor(
    private readonly api: LeaseAccess,
    private readonly attempts = 5,
  ) {
    this.description = `annotation ${SUSPENDED_ANNOTATION} of lease ${api.namespace}/${api.name}`;
  }

  async load(): Promise<boolean | undefined> {
    const value = (await this.api.get())?.metadata.annotations?.[SUSPENDED_ANNOTATION];
    return value === 'true' ? true : value === 'false' ? false : undefined;
  }

  async save(suspended: boolean): Promise<void> {
    const value = String(suspended);
    for (let attempt = 1; attempt <= this.attempts; attempt++) {
      const lease = await this.api.get();
      let written: WriteResult;
      if (!lease) {
        written = await this.api.create({
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: this.api.name, namespace: this.api.namespace, annotations: { [SUSPENDED_ANNOTATION]: value } },
          spec: {},
        });
      } else {
        // Already so: no write, so the Lease's version (which standbys watch) does not move for nothing.
        if (lease.metadata.annotations?.[SUSPENDED_ANNOTATION] === value) return;
        written = await this.api.replace({
          ...lease,
          metadata: { ...lease.metadata, annotations: { ...lease.metadata.annotations, [SUSPENDED_ANNOTATION]: value } },
        });
      }
      if (written.ok) return;
      // 409: someone (a renewal) wrote since we read; read again after a short, random pause.
      await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 100 * attempt));
    }
    throw new Error(`could not write ${this.description}: ${this.attempts} conflicting writes in a row`);
  }
}
