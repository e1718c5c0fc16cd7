import type { FastifyRequest } from 'fastify';
import type { Queryable } from '../store/db.js';
import type { StoredResource } from '../store/resources.js';
import type { ServiceContext } from '../context.js';
import type { Actor } from '../auth/actor.js';

/** A resource about to be written: its API view and its write-only secrets, kept apart. */
export interface Draft {
  data: Record<string, unknown>;
  secrets: Record<string, unknown> | null;
}

export interface WriteContext {
  ctx: ServiceContext;
  req: FastifyRequest;
  tenantId: string;
  projectId: string;
  actor: Actor;
  q: Queryable;
}

/**
 * What a kind does beyond generic CRUD. Generic routes call these hooks; a kind with
 * nothing special has no behaviour at all.
 */
export interface KindBehaviour {
  /** Checks beyond the schema (a DAG without cycles); throw unprocessable_entity naming the field. */
  validate?(draft: Draft, scope: { ctx: ServiceContext; tenantId: string; projectId: string }): Promise<void> | void;
  /** In the write transaction, before the insert. Returned fields go in this response only (shown once). */
  beforeCreate?(draft: Draft, w: WriteContext): Promise<Record<string, unknown> | void>;
  beforeUpdate?(draft: Draft, existing: StoredResource, w: WriteContext): Promise<void>;
  beforeDelete?(existing: StoredResource, w: WriteContext): Promise<void>;
  /**
   * Before the delete's transaction, in transactions of its own: what is too big for one (a
   * project's contents). The delete's own checks must not depend on it: it runs first.
   */
  emptyBeforeDelete?(existing: StoredResource, scope: { ctx: ServiceContext; tenantId: string }): Promise<void>;
  /**
   * After a create, update or delete of the kind has committed (what a replica keeps in memory about
   * it). `resourceId` is the resource updated or deleted (none for a create).
   */
  afterWrite?(scope: { ctx: ServiceContext; tenantId: string; projectId: string; resourceId?: string; deleted: boolean }): void;
  /** For tenant-scoped kinds: which resources an API key (bound to one project) may see. */
  visibleToKey?(actor: Actor, resource: StoredResource): boolean;
}
