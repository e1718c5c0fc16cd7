/**
 * Each replica's short memory of a project's enabled alert rules, as run-end evaluation reads them
 * (alerts.ts). A project may hold 5,000 rules, and reading and parsing them on every run that ends
 * cost 12.4 ms of CPU per run end (SQLite, rules of 410 bytes; in slices of at most 6.4 ms): a
 * tenant whose syncs end often took that from every tenant. Runs ending together share one read.
 *
 * - A rule written through the API drops its project at once on this replica (the kind's
 *   behaviour, after the write commits), and a read under way then is not kept.
 * - Another replica sees the change within RULES_TTL_MS.
 * - At most RULES_MAX_PROJECTS projects are kept (5,000 rules each at most), the oldest out first.
 */
import type { RuleData } from './alerts.js';

const RULES_TTL_MS = 2_000;
const RULES_MAX_PROJECTS = 16;

/** Real elapsed time, never the service's (possibly simulated) clock. */
const now = () => performance.now();

const keyOf = (tenantId: string, projectId: string) => `${tenantId}\0${projectId}`;

export class RuleCache {
  /** Map order is oldest first, for eviction. */
  private readonly kept = new Map<string, { rules: RuleData[]; until: number }>();
  private readonly loading = new Map<string, { stale: boolean; rules: Promise<RuleData[]> }>();

  /** The project's rules, from memory or read by `load` (one read for concurrent callers). */
  rules(tenantId: string, projectId: string, load: () => Promise<RuleData[]>): Promise<RuleData[]> {
    const key = keyOf(tenantId, projectId);
    const hit = this.kept.get(key);
    if (hit && hit.until > now()) return Promise.resolve(hit.rules);
    this.kept.delete(key);
    const under = this.loading.get(key);
    if (under) return under.rules;
    const entry = { stale: false, rules: load() };
    this.loading.set(key, entry);
    const settled = () => {
      if (this.loading.get(key) === entry) this.loading.delete(key);
    };
    entry.rules.then((rules) => {
      settled();
      if (entry.stale) return;
      if (this.kept.size >= RULES_MAX_PROJECTS) this.kept.delete(this.kept.keys().next().value!);
      this.kept.set(key, { rules, until: now() + RULES_TTL_MS });
    }, settled);
    return entry.rules;
  }

  /** A rule of the project was written: the next run end reads the rules again. */
  forget(tenantId: string, projectId: string): void {
    const key = keyOf(tenantId, projectId);
    this.kept.delete(key);
    const under = this.loading.get(key);
    if (under) {
      under.stale = true;
      this.loading.delete(key);
    }
  }
}

const caches = new WeakMap<object, RuleCache>();

/** The rule cache of a store (keyed by its db handle, like auth/key-cache.ts). */
export function ruleCacheOf(db: object): RuleCache {
  let cache = caches.get(db);
  if (!cache) caches.set(db, (cache = new RuleCache()));
  return cache;
}
