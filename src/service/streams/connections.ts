import type { WebSocket } from 'ws';
import type { Actor } from '../auth/actor.js';
import type { RunData } from '../runtime/runs.js';
import type { StreamEvent } from './bus.js';

/** Who connected, checked before the upgrade. */
export interface Access {
  actor: Actor;
  token: string;
  /** Pipeline streams: the run's project, pipeline and the run as it was at connect time. */
  run?: { projectId: string; pipelineId: string; runId: string; data: RunData };
}

export interface Connection {
  socket: WebSocket;
  tenantId: string;
  /** What it follows: one pipeline run (runKey) or a tenant's alerts (alertsKey). */
  key: string;
  access: Access;
  alive: boolean;
  checking: boolean;
  /** Asked to check again while a check was in flight (a revocation that check may have missed). */
  checkAgain?: boolean;
  onEvent(event: StreamEvent): void;
}

export const runKey = (tenantId: string, runId: string) => `run\u0000${tenantId}\u0000${runId}`;
export const alertsKey = (tenantId: string) => `alerts\u0000${tenantId}`;

/** What a bus event for subscribers concerns: its run's key, or its tenant's alerts key. */
export const eventKey = (event: Exclude<StreamEvent, { kind: 'revoked' }>) =>
  event.kind === 'alert' ? alertsKey(event.tenantId) : runKey(event.tenantId, event.runId);

/** Whether a connection uses credentials a `revoked` event names (the actor, or a key of the deleted project, or a run in it). */
export const usesRevoked = (c: Connection, e: Extract<StreamEvent, { kind: 'revoked' }>) =>
  c.tenantId === e.tenantId &&
  ((!!e.actorId && c.access.actor.id === e.actorId) ||
    (!!e.projectId && (c.access.actor.projectId === e.projectId || c.access.run?.projectId === e.projectId)));

/** Closes a socket that is open or opening; a closing or closed one is left alone. */
export function closeSocket(socket: WebSocket, code: number, reason: string): void {
  if (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING) socket.close(code, reason);
}

/** The open connections, and by what they follow, so an event costs only its own subscribers. */
export class Connections implements Iterable<Connection> {
  private readonly all = new Set<Connection>();
  private readonly following = new Map<string, Set<Connection>>();
  private readonly perTenant = new Map<string, number>();

  /** Open connections of a tenant. */
  countOf(tenantId: string): number {
    return this.perTenant.get(tenantId) ?? 0;
  }

  get size(): number {
    return this.all.size;
  }

  [Symbol.iterator](): Iterator<Connection> {
    return this.all[Symbol.iterator]();
  }

  add(c: Connection): void {
    if (this.all.has(c)) return;
    this.all.add(c);
    this.perTenant.set(c.tenantId, this.countOf(c.tenantId) + 1);
    let set = this.following.get(c.key);
    if (!set) this.following.set(c.key, (set = new Set()));
    set.add(c);
  }

  delete(c: Connection): void {
    if (!this.all.delete(c)) return;
    const left = this.countOf(c.tenantId) - 1;
    if (left > 0) this.perTenant.set(c.tenantId, left);
    else this.perTenant.delete(c.tenantId);
    const set = this.following.get(c.key);
    set?.delete(c);
    if (set?.size === 0) this.following.delete(c.key);
  }

  /** The connections that follow `key`. */
  subscribersOf(key: string): Iterable<Connection> {
    return this.following.get(key) ?? [];
  }
}
