import type { KindDescriptor } from '../kinds/index.js';
import type { AttrSpec } from './schema.js';
import { isTfObject, type TfObject } from './values.js';

/**
 * Provider-only settings of a resource: attributes that change what the provider does around
 * the API calls and are never sent to the API. Terraform keeps them in the state like any other
 * attribute. Which ones a resource has follows from its descriptor:
 * - `x-provisioning` kinds get a `timeouts` block (as terraform-plugin-framework-timeouts): how
 *   long create, update and delete wait for the platform's plan + apply;
 * - `x-test-action` kinds get `run_setup_tests` (as Fivetran's provider): test the connection
 *   after create and update;
 * - the scope container (a project) gets `force_destroy` (as AWS's S3 bucket): without it, a
 *   destroy refuses to delete a project that still holds resources, which deleting it would delete.
 */

export type TimeoutOp = 'create' | 'update' | 'delete';
/** How long each operation waits when `timeouts` leaves it out (Go durations). */
export const TIMEOUT_DEFAULTS: Record<TimeoutOp, string> = { create: '30m', update: '30m', delete: '20m' };
export const RUN_SETUP_TESTS = 'run_setup_tests';
export const TIMEOUTS = 'timeouts';
export const FORCE_DESTROY = 'force_destroy';

const setting = (name: string, description: string, elem: 'string' | 'bool', extra: Partial<AttrSpec> = {}): AttrSpec => ({
  name,
  shape: 'primitive',
  elem,
  required: false,
  optional: true,
  computed: false,
  sensitive: false,
  replace: false,
  description,
  json: { type: elem === 'bool' ? 'boolean' : 'string' },
  synthetic: 'setting',
  ...extra,
});

function timeoutsBlock(d: KindDescriptor): AttrSpec {
  const noun = d.title.toLowerCase();
  const wait = (op: TimeoutOp, what: string) =>
    setting(
      op,
      `How long the ${op} of the ${noun} may wait for ${what}, as a Go duration ("30s", "10m", "2h"). Default ${TIMEOUT_DEFAULTS[op]}.`,
      'string',
    );
  return setting(
    TIMEOUTS,
    `How long create, update and delete wait for the platform to provision the ${noun} (its project's infrastructure plan and apply). Not sent to the API.`,
    'string',
    {
      shape: 'object',
      elem: undefined,
      block: true,
      json: { type: 'object' },
      attrs: [
        wait('create', 'it to be provisioned'),
        wait('update', 'the change to be provisioned'),
        wait('delete', 'it to be deprovisioned'),
      ],
    },
  );
}

/** The provider-only settings a kind's resource gets, from its descriptor. */
export function settingAttrs(d: KindDescriptor): AttrSpec[] {
  const out: AttrSpec[] = [];
  if (d.testAction) {
    out.push(
      setting(
        RUN_SETUP_TESTS,
        `Test the ${d.title.toLowerCase()}'s connection after each create and update (the API's \`${d.testAction}\` action); a failed test fails the apply with the platform's message. Not sent to the API.`,
        'bool',
        { computed: true, default: false, json: { type: 'boolean', default: false } },
      ),
    );
  }
  if (d.provisioning) out.push(timeoutsBlock(d));
  if (d.scopeContainer) {
    out.push(
      setting(
        FORCE_DESTROY,
        `Delete the ${d.title.toLowerCase()} even when it still holds resources (deleting it deletes them): without it, a destroy that finds any (made by hand, by another configuration) fails and names them. Set it and apply before the destroy. Not sent to the API.`,
        'bool',
        { computed: true, default: false, json: { type: 'boolean', default: false } },
      ),
    );
  }
  return out;
}

const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, μs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds of a Go duration ("1h30m", "90s", "1.5h"), or null when it is not one (or not positive). */
export function parseDuration(text: string): number | null {
  const s = text.trim();
  if (!/^(\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))*$/.test(s)) return null;
  let ms = 0;
  for (const [, n, , unit] of s.matchAll(/(\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/g)) ms += Number(n) * UNIT_MS[unit];
  return ms > 0 ? ms : null;
}

/** The timeout of an operation: from the `timeouts` block of `state` (plan or prior), else the default. */
export function timeoutOf(state: TfObject | null, op: TimeoutOp): { ms: number; text: string; configured: boolean } {
  const block = state?.[TIMEOUTS];
  const value = isTfObject(block) && typeof block[op] === 'string' ? (block[op] as string) : null;
  const ms = value === null ? null : parseDuration(value);
  if (value !== null && ms !== null) return { ms, text: value, configured: true };
  return { ms: parseDuration(TIMEOUT_DEFAULTS[op])!, text: TIMEOUT_DEFAULTS[op], configured: false };
}

/** Config errors of the settings: a timeout that is not a Go duration, as [attribute path, message]. */
export function settingErrors(config: TfObject | null): { path: string[]; message: string }[] {
  const block = config?.[TIMEOUTS];
  if (!isTfObject(block)) return [];
  const out: { path: string[]; message: string }[] = [];
  for (const op of Object.keys(TIMEOUT_DEFAULTS)) {
    const v = block[op];
    if (typeof v === 'string' && parseDuration(v) === null) {
      out.push({
        path: [TIMEOUTS, op],
        message: `${JSON.stringify(v)} is not a duration: give a positive Go duration such as "30s", "10m" or "1h30m"`,
      });
    }
  }
  return out;
}

/** The value a setting has when nothing set it (an imported resource, a state from before it existed). */
export const settingDefault = (a: AttrSpec) => (a.default === undefined ? null : (a.default as boolean | string));
