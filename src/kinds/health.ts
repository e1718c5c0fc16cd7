import type { KindDescriptor } from './descriptor.js';

/**
 * Health of a live resource, derived from its kind's `x-health` rule (one function for every
 * kind and surface). Argo CD's vocabulary: healthy, progressing (still getting there), degraded
 * (the platform says it does not work), suspended (paused on purpose), unknown (a state value
 * the rule does not list: a newer service than this model).
 */
export type Health = 'healthy' | 'progressing' | 'degraded' | 'suspended' | 'unknown';

export interface HealthStatus {
  health: Health;
  /** Why it is not healthy: the platform's message when it gives one, else the state value. */
  reason?: string;
  /**
   * Healthy by its state, but that state is its kind's initial one (`x-initial`): it has never
   * run, so nothing has shown that it works (a connector never synced, its credentials untried).
   */
  neverRun?: true;
  /**
   * Healthy by its state, but changed after it last ran (x-health `ranAt`): its current settings
   * (a new host, new credentials) are untried. A sync that once worked says nothing of them.
   */
  changedSinceRun?: true;
}

/** Whether `object` was changed after it last ran (its rule's `ranAt`), both as the API gives them. */
function changedSinceRun(ranAtField: string | undefined, object: Record<string, unknown>): boolean {
  const ranAt = ranAtField ? object[ranAtField] : undefined;
  const updatedAt = object.updated_at;
  return typeof ranAt === 'string' && typeof updatedAt === 'string' && Date.parse(updatedAt) > Date.parse(ranAt);
}

const ORDER: Exclude<Health, 'unknown'>[] = ['degraded', 'progressing', 'suspended', 'healthy'];

/** The health of `object`, a resource of kind `d` as the API returns it. */
export function healthOf(d: KindDescriptor, object: Record<string, unknown>): HealthStatus {
  const rule = d.health;
  if (!rule) return { health: 'healthy' };
  const raw = object[rule.field];
  const value = raw === undefined ? null : raw;
  const health = ORDER.find((h) => (rule[h] ?? []).includes(value as string | null)) ?? 'unknown';
  if (health === 'healthy') {
    if (value === d.initialState) return { health, neverRun: true };
    return changedSinceRun(rule.ranAt, object) ? { health, changedSinceRun: true } : { health };
  }
  const message = rule.message ? object[rule.message] : undefined;
  const state = `${rule.field} is ${value === null ? 'not set' : String(value)}`;
  return { health, reason: typeof message === 'string' && message && health !== 'progressing' ? `${state}: ${message}` : state };
}

/**
 * The platform's reason for a run (and its resources' last_error) that a service restart cut short:
 * nothing is wrong with the configuration, and running it again is the fix.
 */
export const RUN_INTERRUPTED = 'interrupted by service restart';

/** True when nothing more is expected to happen by itself: healthy, degraded or suspended. */
export const isSettled = (h: Health) => h !== 'progressing';
