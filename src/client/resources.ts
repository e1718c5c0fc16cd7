import type { KindDescriptor } from '../kinds/index.js';
import { ApiError, DataPlatformError } from './errors.js';
import type { HttpCore, Query } from './http.js';
import type { WritableKindName, WritableKinds } from '../kinds/generated/kinds.js';

/** The list envelope (spec section 4, Pagination). */
export interface Page<T> {
  data: T[];
  next_cursor?: string;
  has_more: boolean;
}

/** The client always pages at the maximum the API allows. */
export const PAGE_LIMIT = 100;

export interface CallOptions {
  signal?: AbortSignal;
}

export interface PageOptions extends CallOptions {
  cursor?: string;
  /** 1-100; default 100. */
  limit?: number;
}

/** A paginated list endpoint with optional filters `F`. */
export class ListEndpoint<T, F extends Query = Query> {
  constructor(
    protected readonly core: HttpCore,
    readonly route: string,
    protected readonly params: Record<string, string>,
  ) {}

  /** One page (`limit` 100 unless given). */
  async list(filters?: F, options: PageOptions = {}): Promise<Page<T>> {
    const res = await this.core.call<Page<T>>({
      method: 'GET',
      route: this.route,
      params: this.params,
      query: { ...(filters ?? {}), limit: options.limit ?? PAGE_LIMIT, cursor: options.cursor },
      signal: options.signal,
    });
    return res.body;
  }

  /** Every item, page after page at limit=100, fetched lazily as the loop goes on. */
  async *iterate(filters?: F, options: CallOptions = {}): AsyncGenerator<T, void, undefined> {
    let cursor: string | undefined;
    const seen = new Set<string>();
    for (;;) {
      const page = await this.list(filters, { ...options, cursor, limit: PAGE_LIMIT });
      for (const item of page.data) yield item;
      if (!page.has_more) return;
      if (!page.next_cursor || seen.has(page.next_cursor)) {
        throw new DataPlatformError(`GET ${this.route}: has_more without a new next_cursor; stopping instead of looping`);
      }
      seen.add(page.next_cursor);
      cursor = page.next_cursor;
    }
  }

  async listAll(filters?: F, options: CallOptions = {}): Promise<T[]> {
    const out: T[] = [];
    for await (const item of this.iterate(filters, options)) out.push(item);
    return out;
  }
}

type KindOps<K extends WritableKindName> = WritableKinds[K]['operations'];
type Resource<K extends WritableKindName> = WritableKinds[K]['resource'];

interface ReadOps<T> {
  readonly kind: string;
  readonly descriptor: KindDescriptor;
  list(options?: PageOptions): Promise<Page<T>>;
  iterate(options?: CallOptions): AsyncGenerator<T, void, undefined>;
  listAll(options?: CallOptions): Promise<T[]>;
  get(id: string, options?: CallOptions): Promise<T>;
  /**
   * The resource whose identity (name; email for users, case-insensitively) is `value`, or
   * undefined. Reads the list, as the engine does after an AmbiguousCreateError.
   */
  findByName(value: string, options?: CallOptions): Promise<T | undefined>;
}

/** The typed API of one kind in one scope; methods exist only for the operations the kind serves. */
export type ResourceClient<K extends WritableKindName> = ReadOps<Resource<K>> &
  ('create' extends KindOps<K> ? { create(body: WritableKinds[K]['create'], options?: CallOptions): Promise<Resource<K>> } : unknown) &
  ('update' extends KindOps<K>
    ? { update(id: string, patch: WritableKinds[K]['update'], options?: CallOptions): Promise<Resource<K>> }
    : unknown) &
  ('delete' extends KindOps<K> ? { delete(id: string, options?: CallOptions): Promise<void> } : unknown);

type AnyResource = Record<string, unknown> & { id: string };

/** The same API without compile-time kind types, for code that walks the descriptors. */
export interface DynamicResourceClient extends ReadOps<AnyResource> {
  create(body: Record<string, unknown>, options?: CallOptions): Promise<AnyResource>;
  update(id: string, patch: Record<string, unknown>, options?: CallOptions): Promise<AnyResource>;
  delete(id: string, options?: CallOptions): Promise<void>;
}

/** Routes of a kind, from its descriptor, matching the service's route patterns. */
export function kindRoutes(d: KindDescriptor) {
  if (!d.collection) throw new DataPlatformError(`kind ${d.kind} has no collection`);
  const collection = d.scope === 'project' ? `/projects/{id}/${d.collection}` : `/${d.collection}`;
  return { collection, item: `${collection}/{resourceId}` };
}

/** One implementation for every kind, driven by its descriptor. */
export class KindResourceClient implements DynamicResourceClient {
  private readonly routes: { collection: string; item: string };
  private readonly params: Record<string, string>;
  private readonly lister: ListEndpoint<AnyResource, Query>;
  private readonly identityLowercase: boolean;

  constructor(
    private readonly core: HttpCore,
    readonly descriptor: KindDescriptor,
    private readonly projectId: string | undefined,
  ) {
    if (descriptor.readOnlyKind)
      throw new DataPlatformError(`kind ${descriptor.kind} is read-only: use its view (alerts, runs, audit logs...)`);
    if (descriptor.scope === 'project' && !projectId)
      throw new DataPlatformError(`kind ${descriptor.kind} lives in a project: pass { projectId }`);
    this.routes = kindRoutes(descriptor);
    this.params = descriptor.scope === 'project' ? { id: projectId! } : {};
    this.lister = new ListEndpoint(core, this.routes.collection, this.params);
    this.identityLowercase = descriptor.normalizers.some(
      (n) => n.rule === 'lowercase' && n.path.length === 1 && n.path[0] === descriptor.identity,
    );
  }

  get kind() {
    return this.descriptor.kind;
  }

  private supports(op: 'list' | 'create' | 'get' | 'update' | 'delete') {
    if (!this.descriptor.operations.includes(op)) throw new DataPlatformError(`kind ${this.kind} does not support ${op}`);
  }

  list(options: PageOptions = {}) {
    this.supports('list');
    return this.lister.list(undefined, options);
  }

  iterate(options: CallOptions = {}) {
    this.supports('list');
    return this.lister.iterate(undefined, options);
  }

  listAll(options: CallOptions = {}) {
    this.supports('list');
    return this.lister.listAll(undefined, options);
  }

  async get(id: string, options: CallOptions = {}) {
    this.supports('get');
    return (
      await this.core.call<AnyResource>({
        method: 'GET',
        route: this.routes.item,
        params: { ...this.params, resourceId: id },
        signal: options.signal,
      })
    ).body;
  }

  async findByName(value: string, options: CallOptions = {}) {
    const norm = (v: unknown) => (typeof v === 'string' ? (this.identityLowercase ? v.trim().toLowerCase() : v) : v);
    const wanted = norm(value);
    for await (const item of this.iterate(options)) {
      const found = item[this.descriptor.identity];
      if (norm(found) === wanted) return item;
    }
    return undefined;
  }

  async create(body: Record<string, unknown>, options: CallOptions = {}) {
    this.supports('create');
    const identity = body[this.descriptor.identity];
    const res = await this.core.call<AnyResource>({
      method: 'POST',
      route: this.routes.collection,
      params: this.params,
      body,
      signal: options.signal,
      create: {
        kind: this.kind,
        scope: this.descriptor.scope,
        projectId: this.projectId,
        identity: { field: this.descriptor.identity, value: typeof identity === 'string' ? identity : String(identity ?? '') },
      },
    });
    return res.body;
  }

  async update(id: string, patch: Record<string, unknown>, options: CallOptions = {}) {
    this.supports('update');
    return (
      await this.core.call<AnyResource>({
        method: 'PATCH',
        route: this.routes.item,
        params: { ...this.params, resourceId: id },
        body: patch,
        signal: options.signal,
      })
    ).body;
  }

  /**
   * Deletes. When an earlier attempt failed ambiguously and the retry finds nothing, the
   * first attempt did it: that 404 counts as success.
   */
  async delete(id: string, options: CallOptions = {}) {
    this.supports('delete');
    try {
      await this.core.call({
        method: 'DELETE',
        route: this.routes.item,
        params: { ...this.params, resourceId: id },
        signal: options.signal,
      });
    } catch (err) {
      if (err instanceof ApiError && err.status === 404 && err.afterAmbiguousFailure) return;
      throw err;
    }
  }
}
