import type { ProviderCode } from '../kinds/errors.js';
import { AmbiguousCreateError, ApiError, type DataPlatformClient, type DynamicResourceClient } from '../client/index.js';
import { deepEqual, diffResource, normalize } from '../engine/diff.js';
import { healthOf, kindPlural, valuesAt, writableKinds } from '../kinds/index.js';
import { ListCache } from './list-cache.js';
import { FORCE_DESTROY, settingDefault } from './settings.js';
import { apiField, apiToTf, defaultTf, objectToApi, objectToTf, tfToApi, type AttrSpec, type ResourceSpec } from './schema.js';
import { UNKNOWN, hasUnknown, inconsistencies, isTfObject, tfEqual, type TfObject, type TfValue } from './values.js';

/** Raised for problems shown to the user as an error diagnostic. */
/** An error of the provider itself, with its code (kinds/errors.ts), shown to Terraform as summary and detail. */
export class ProviderError extends Error {
  constructor(
    readonly code: ProviderCode,
    readonly summary: string,
    readonly detail = '',
    readonly newState?: TfObject | null,
  ) {
    super(summary);
  }
}

/** The `*_wo_version` values below an attribute's value, in order. */
function woVersions(a: AttrSpec, v: TfValue, out: TfValue[] = []): TfValue[] {
  if (a.synthetic === 'wo_version') out.push(v);
  else if (a.shape === 'object' && isTfObject(v)) for (const c of a.attrs!) woVersions(c, v[c.name] ?? null, out);
  else if (a.shape === 'objects' && Array.isArray(v))
    for (const item of v) if (isTfObject(item)) for (const c of a.attrs!) woVersions(c, item[c.name] ?? null, out);
  return out;
}

/** Puts `<secret>_wo` values from the config into an API body as `<secret>`. */
export function injectWriteOnly(attrs: AttrSpec[], config: TfObject, body: Record<string, unknown>): void {
  for (const a of attrs) {
    const c = config[a.name] ?? null;
    if (a.synthetic === 'wo') {
      if (typeof c === 'string' || typeof c === 'number') body[a.secretOf!] = c;
    } else if (a.shape === 'object' && isTfObject(c) && body[apiField(a)] && typeof body[apiField(a)] === 'object') {
      injectWriteOnly(a.attrs!, c, body[apiField(a)] as Record<string, unknown>);
    } else if (a.shape === 'objects' && Array.isArray(c) && Array.isArray(body[apiField(a)])) {
      const items = body[apiField(a)] as Record<string, unknown>[];
      c.forEach((item, i) => {
        if (isTfObject(item) && items[i]) injectWriteOnly(a.attrs!, item, items[i]);
      });
    }
  }
}

/** Config errors: a secret given both plainly and write-only. */
export function writeOnlyConflicts(attrs: AttrSpec[], config: TfObject | null, path: string[] = [], out: string[] = []): string[] {
  if (!config) return out;
  for (const a of attrs) {
    const c = config[a.name] ?? null;
    if (a.synthetic === 'wo' && c !== null && (config[a.secretOf!] ?? null) !== null) out.push([...path, a.secretOf!].join('.'));
    else if (a.shape === 'object' && isTfObject(c)) writeOnlyConflicts(a.attrs!, c, [...path, a.name], out);
    else if (a.shape === 'objects' && Array.isArray(c))
      c.forEach((item, i) => isTfObject(item) && writeOnlyConflicts(a.attrs!, item, [...path, a.name, String(i)], out));
  }
  return out;
}

/**
 * Where a config sets a write-only attribute (`<secret>_wo`, unknown values included): each as
 * the attribute names and list positions down to it, e.g. `['credentials', 'password_wo']`.
 */
export function writeOnlySet(
  attrs: AttrSpec[],
  config: TfObject | null,
  path: (string | number)[] = [],
  out: (string | number)[][] = [],
): (string | number)[][] {
  if (!config) return out;
  for (const a of attrs) {
    const c = config[a.name] ?? null;
    if (a.writeOnly && c !== null) out.push([...path, a.name]);
    else if (a.shape === 'object' && isTfObject(c)) writeOnlySet(a.attrs!, c, [...path, a.name], out);
    else if (a.shape === 'objects' && Array.isArray(c))
      c.forEach((item, i) => isTfObject(item) && writeOnlySet(a.attrs!, item, [...path, a.name, i], out));
  }
  return out;
}

const computedOnly = (a: AttrSpec) => a.computed && !a.optional && !a.required;
/** Computed fields that never change after creation. */
const STABLE = new Set(['id', 'created_at']);

/**
 * Plan, apply, read and import for one kind, driven only by its descriptor and the attribute
 * specs derived from it. Values are Terraform values (see values.ts) in and out.
 */
export class ResourceHandler {
  constructor(
    readonly spec: ResourceSpec,
    readonly client: () => DataPlatformClient,
    /** Shared by the handlers of one provider process (see ListCache). */
    private readonly cache = new ListCache(),
  ) {}

  private get d() {
    return this.spec.descriptor;
  }

  private get projectScoped() {
    return this.d.scope === 'project';
  }

  private api(projectId: string | null): DynamicResourceClient {
    return this.client().resourcesOf(this.d.kind, this.projectScoped ? { projectId: projectId ?? undefined } : {});
  }

  // ---- plan ----

  private planAttr(a: AttrSpec, c: TfValue, p: TfValue, create: boolean): TfValue {
    if (a.writeOnly) return null;
    if (computedOnly(a)) return create || p === undefined ? UNKNOWN : p;
    if (c === UNKNOWN) return UNKNOWN;
    if (c === null) {
      if (a.default !== undefined) return defaultTf(a);
      if (a.computed) return create ? UNKNOWN : p;
      return null;
    }
    if (a.shape === 'object' && isTfObject(c)) {
      const prior = isTfObject(p) ? p : null;
      const out: TfObject = {};
      for (const child of a.attrs!)
        out[child.name] = this.planAttr(child, c[child.name] ?? null, prior ? (prior[child.name] ?? null) : null, create || !prior);
      return out;
    }
    if (a.shape === 'objects' && Array.isArray(c)) {
      const prior = Array.isArray(p) ? p : [];
      return c.map((item, i) => {
        if (!isTfObject(item)) return item;
        const pi = isTfObject(prior[i]) ? (prior[i] as TfObject) : null;
        const out: TfObject = {};
        for (const child of a.attrs!)
          out[child.name] = this.planAttr(child, item[child.name] ?? null, pi ? (pi[child.name] ?? null) : null, create || !pi);
        return out;
      });
    }
    return c;
  }

  /** `retest`: plan an update even when nothing changed, so that the apply tests the connection again (see private-state.ts). */
  plan(
    prior: TfObject | null,
    proposed: TfObject | null,
    config: TfObject | null,
    o: { retest?: boolean } = {},
  ): { planned: TfObject | null; replace: string[][] } {
    if (proposed === null) return { planned: null, replace: [] };
    const create = prior === null;
    const planned: TfObject = {};
    for (const a of this.spec.attrs)
      planned[a.name] = this.planAttr(a, config?.[a.name] ?? null, create ? null : (prior[a.name] ?? null), create);
    const replace: string[][] = [];
    if (!create) {
      let changed = false;
      for (const a of this.spec.attrs) {
        if (computedOnly(a)) continue;
        const before = prior[a.name] ?? null;
        const after = planned[a.name];
        if (tfEqual(before, after)) continue;
        // Only a normalisation (or default) difference: keep the prior spelling.
        if (before !== null && !hasUnknown(after) && this.equivalent(a, after, before)) {
          planned[a.name] = before;
          continue;
        }
        changed = true;
        if (a.replace) replace.push([a.name]);
      }
      if ((changed || this.needsProvisioning(prior) || o.retest) && replace.length === 0) {
        for (const a of this.spec.attrs)
          if (computedOnly(a) && !STABLE.has(apiField(a)) && !this.d.onceFields.includes(apiField(a))) planned[a.name] = UNKNOWN;
      }
    }
    return { planned, replace };
  }

  /**
   * A resource the platform failed to provision (degraded, e.g. its last apply failed), or whose
   * change waits for an apply (its state back at `x-initial`, pending: a PATCH that no apply
   * followed), is planned as an update even when its configuration did not change: the apply then
   * runs the platform's plan and apply, so a fixed cause, or a change no apply made, converges
   * without touching the config.
   */
  private needsProvisioning(prior: TfObject): boolean {
    if (!this.d.provisioning) return false;
    const api = objectToApi(this.spec.attrs, prior);
    if (healthOf(this.d, api).health === 'degraded') return true;
    return this.d.health !== undefined && this.d.initialState !== undefined && api[this.d.health.field] === this.d.initialState;
  }

  /** Same meaning for the API: equal after defaults and server normalisation, secrets equal. */
  equivalent(a: AttrSpec, x: TfValue, y: TfValue): boolean {
    if (hasUnknown(x) || hasUnknown(y)) return false;
    if (tfEqual(x, y)) return true;
    // A provider-only setting has no API form to normalise.
    if (a.synthetic === 'setting') return false;
    // The project is the resource's scope, computed in the API's body: the engine's diff
    // ignores it, but another project is another resource.
    if (this.projectScoped && a.name === 'project_id') return false;
    if (!tfEqual(woVersions(a, x), woVersions(a, y))) return false;
    const ax = tfToApi(a, x);
    const ay = tfToApi(a, y);
    const field = apiField(a);
    const desired: Record<string, unknown> = ax === undefined ? {} : { [field]: ax };
    const live: Record<string, unknown> = ay === undefined ? {} : { [field]: ay };
    // Either side may be a user's spelling (prior state, config): normalise both.
    const liveNormalised = structuredClone(live);
    normalize(this.d, liveNormalised);
    if (diffResource(this.d, desired, liveNormalised, { clearUndeclared: true }).fields.includes(field)) return false;
    for (const path of this.d.secretPaths) {
      if (path[0] !== field) continue;
      const vx = valuesAt(desired, path).map((v) => v.value);
      const vy = valuesAt(live, path).map((v) => v.value);
      if (!deepEqual(vx, vy)) return false;
    }
    return true;
  }

  // ---- reading back ----

  /** Copies secret values (never returned by the API) from `from` into `into`. */
  private overlaySecrets(a: AttrSpec, into: TfValue, from: TfValue): TfValue {
    if (a.writeOnly) return null;
    if (a.synthetic === 'wo_version') return from === UNKNOWN ? null : from;
    if (a.sensitive && !a.computed && (a.shape === 'primitive' || a.shape === 'list' || a.shape === 'map') && a.json['x-secret']) {
      return from === UNKNOWN ? null : from;
    }
    if (a.shape === 'object' && isTfObject(into) && isTfObject(from)) {
      const out: TfObject = { ...into };
      for (const child of a.attrs!) out[child.name] = this.overlaySecrets(child, into[child.name] ?? null, from[child.name] ?? null);
      return out;
    }
    if (a.shape === 'objects' && Array.isArray(into) && Array.isArray(from)) {
      return into.map((item, i) => {
        const src = from[i];
        if (!isTfObject(item) || !isTfObject(src)) return item;
        const out: TfObject = { ...item };
        for (const child of a.attrs!) out[child.name] = this.overlaySecrets(child, item[child.name] ?? null, src[child.name] ?? null);
        return out;
      });
    }
    return into;
  }

  /**
   * The state for a remote object: for each field the API treats as unchanged, `base`'s
   * value (the user's spelling); otherwise the remote value. Secrets come from `base`.
   */
  reconcile(base: TfObject, remote: Record<string, unknown>): TfObject {
    const out: TfObject = {};
    for (const a of this.spec.attrs) {
      const b = base[a.name] ?? null;
      if (a.name === 'project_id' && this.projectScoped) {
        out[a.name] = b === null || b === UNKNOWN ? ((remote.project_id as string) ?? null) : b;
      } else if (a.synthetic === 'setting') {
        // Never in the API's answer: the configuration's (or the state's) value stands.
        out[a.name] = b === UNKNOWN ? settingDefault(a) : b;
      } else if (computedOnly(a)) {
        const field = apiField(a);
        out[a.name] = remote[field] === undefined && this.d.onceFields.includes(field) && b !== UNKNOWN ? b : apiToTf(a, remote[field]);
      } else {
        const r = this.overlaySecrets(a, apiToTf(a, remote[apiField(a)]), b);
        out[a.name] = b !== UNKNOWN && !hasUnknown(b) && this.equivalent(a, b, r) ? b : r;
      }
    }
    return out;
  }

  // ---- apply ----

  async apply(prior: TfObject | null, planned: TfObject | null, config: TfObject | null = null): Promise<TfObject | null> {
    if (planned === null) {
      if (prior) await this.remove(prior);
      return null;
    }
    const projectId = this.projectScoped ? (planned.project_id as string) : null;
    const api = this.api(projectId);
    const writable = this.spec.attrs.filter((a) => !computedOnly(a) && !(a.name === 'project_id' && this.projectScoped));
    // Any write attempt (even a failed, maybe half-done one) makes this run's listing stale.
    const remote = await this.write(api, writable, prior, planned, config).finally(() => this.cache.invalidate(this.d.kind, projectId));
    const state = this.reconcile(planned, remote);
    const problems = inconsistencies(planned, state);
    if (problems.length) {
      throw new ProviderError(
        'plan_mismatch',
        `${this.spec.typeName}: the API's answer does not match the plan`,
        problems.join('\n'),
        state,
      );
    }
    return state;
  }

  private async write(
    api: DynamicResourceClient,
    writable: AttrSpec[],
    prior: TfObject | null,
    planned: TfObject,
    config: TfObject | null,
  ): Promise<Record<string, unknown>> {
    if (prior === null) {
      const body = objectToApi(writable, planned);
      if (config) injectWriteOnly(writable, config, body);
      return this.create(api, body);
    }
    const patch: Record<string, unknown> = {};
    for (const a of writable) {
      if (a.synthetic || tfEqual(prior[a.name] ?? null, planned[a.name] ?? null)) continue;
      patch[apiField(a)] = tfToApi(a, planned[a.name] ?? null) ?? null;
      if (config) injectWriteOnly([a], config, patch);
    }
    // A top-level `<secret>_wo_version` that changed sends `<secret>_wo` again.
    for (const a of writable) {
      if (a.synthetic !== 'wo' || !config) continue;
      const version = `${a.secretOf}_wo_version`;
      if (!tfEqual(prior[version] ?? null, planned[version] ?? null)) injectWriteOnly([a], config, patch);
    }
    return Object.keys(patch).length ? api.update(prior.id as string, patch) : api.get(prior.id as string);
  }

  /**
   * A create whose outcome is unknown (cut off, or a 5xx after it reached the service) is never
   * sent again blindly: like the engine, look the object up by its name first and take it if it
   * is there. Not for kinds with a value shown only in the create answer (an API key's `key`):
   * it would be lost, so the error stands and its hint says what to do.
   */
  private async create(api: DynamicResourceClient, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    try {
      return await api.create(body);
    } catch (err) {
      if (!(err instanceof AmbiguousCreateError) || this.d.onceFields.length) throw err;
      // When even the lookup fails, nobody knows: the error stands.
      const found = await api.findByName(err.identity.value).catch(() => {
        throw err;
      });
      return found ?? api.create(body);
    }
  }

  private async remove(prior: TfObject) {
    const projectId = this.projectScoped ? (prior.project_id as string) : null;
    if (this.d.scopeContainer && prior[FORCE_DESTROY] !== true) await this.refuseIfNotEmpty(prior);
    try {
      await this.api(projectId).delete(prior.id as string);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return;
      throw err;
    } finally {
      this.cache.invalidate(this.d.kind, projectId);
    }
  }

  /**
   * Terraform deletes what a project's resources reference after them, so what a destroy of the
   * project still finds in it is not this configuration's: deleting the project would delete it
   * too. One page of one item per kind tells (a kind this credential may not list is not known).
   */
  private async refuseIfNotEmpty(project: TfObject) {
    const id = project.id as string;
    const kinds = writableKinds().filter((k) => k.scope === 'project' && k.operations.includes('list'));
    const found = await Promise.all(
      kinds.map(async (k) => {
        try {
          return (await this.client().resourcesOf(k.kind, { projectId: id }).list({ limit: 1 })).data.length ? k : undefined;
        } catch (err) {
          if (err instanceof ApiError && (err.status === 403 || err.status === 404)) return undefined;
          throw err;
        }
      }),
    );
    const held = found.filter((k) => k !== undefined).map((k) => kindPlural(k));
    if (!held.length) return;
    throw new ProviderError(
      'not_empty',
      `${this.spec.typeName}: project ${JSON.stringify(project.name)} still holds resources this configuration does not manage (${held.join(', ')})`,
      'Deleting the project would delete them too. Delete or move them first, or set force_destroy = true on the project and apply it, then destroy again.',
    );
  }

  /**
   * The resource as the service has it now, by its own GET (never from a listing: called after
   * provisioning changed its status), reconciled with `state`.
   */
  async fetch(state: TfObject): Promise<TfObject> {
    const projectId = this.projectScoped ? (state.project_id as string) : null;
    this.cache.invalidate(this.d.kind, projectId);
    return this.reconcile(state, await this.api(projectId).get(state.id as string));
  }

  // ---- read / import / upgrade ----

  async read(state: TfObject | null): Promise<TfObject | null> {
    if (!state || typeof state.id !== 'string') return state;
    const projectId = this.projectScoped ? (state.project_id as string) : null;
    const api = this.api(projectId);
    try {
      // From this run's listing of the collection when there is one; a GET otherwise, and to
      // confirm that an object missing from the list is really gone.
      const listed = await this.cache.byId(api, projectId, state.id).catch(() => null);
      const remote = listed ?? (await api.get(state.id));
      return this.reconcile(state, remote);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return null;
      throw err;
    }
  }

  /**
   * The id `terraform import` takes for the object `state` describes (`<project_id>/<identity>`, or
   * the identity alone for tenant-level kinds); undefined while either is unknown.
   */
  importId(state: TfObject | null): string | undefined {
    const attr = this.spec.attrs.find((a) => apiField(a) === this.d.identity);
    const value = attr && state?.[attr.name];
    if (typeof value !== 'string' || !value) return undefined;
    if (!this.projectScoped) return value;
    return typeof state?.project_id === 'string' && state.project_id ? `${state.project_id}/${value}` : undefined;
  }

  async import(id: string): Promise<TfObject> {
    let projectId: string | null = null;
    let ref = id;
    if (this.projectScoped) {
      const slash = id.indexOf('/');
      if (slash <= 0 || slash === id.length - 1) {
        throw new ProviderError(
          'invalid_import_id',
          `${this.spec.typeName}: import id must be <project_id>/<id> or <project_id>/<${this.d.identity}>`,
          `got ${JSON.stringify(id)}`,
        );
      }
      projectId = id.slice(0, slash);
      ref = id.slice(slash + 1);
    }
    const api = this.api(projectId);
    let remote: Record<string, unknown> | undefined;
    try {
      remote = await api.get(ref);
    } catch (err) {
      if (!(err instanceof ApiError && (err.status === 404 || err.status === 400))) throw err;
    }
    remote ??= await api.findByName(ref);
    if (!remote)
      throw new ProviderError(
        'not_found',
        `${this.spec.typeName}: nothing found for ${JSON.stringify(id)}`,
        `looked up by id and by ${this.d.identity}`,
      );
    const state = objectToTf(this.spec.attrs, remote);
    if (projectId) state.project_id = projectId;
    for (const a of this.spec.attrs) if (a.synthetic === 'setting') state[a.name] = settingDefault(a);
    return state;
  }

  upgrade(raw: unknown): TfObject | null {
    if (!isTfObject(raw as TfValue)) return null;
    const obj = raw as Record<string, TfValue>;
    const out: TfObject = {};
    // A setting added since the state was written gets its default, so it plans as no change.
    for (const a of this.spec.attrs) out[a.name] = obj[a.name] ?? (a.synthetic === 'setting' ? settingDefault(a) : null);
    return out;
  }
}
