import { nextTickAfter } from '../../kinds/cron.js';
import { KINDS } from '../../kinds/index.js';
import { insertRows, type Queryable, type SqlValue } from './db.js';

/**
 * The `schedules` table (migration 6): one row per resource whose kind has a cron field
 * (`x-format: cron`, the descriptor's `scheduleField`) and whose schedule is set, holding the
 * cron tick it waits for (`tick`, epoch ms) and when that tick is due (`next_due_at` = tick +
 * `offset_ms`), indexed on next_due_at. The resource store keeps it in step with the resource
 * (insert, a schedule changed or cleared, delete, project delete); the scheduler reads only the
 * due rows and advances each one with `nextTickAfter`, so a pass costs what is due, not what exists.
 *
 * Spread: every resource has a stable offset, a hash of its id mod 60 s (like Jenkins' `H`), so that
 * 40,000 connectors on `*\/15 * * * *` do not all start on the same second: a run starts up to 59 s
 * after its cron tick. The offset, like every wait of the service, is divided by the time scale (spreadMs).
 */
export const SPREAD_SECONDS = 60;

/** Kinds that have a cron schedule, and the field that holds it, from the descriptors. */
export const SCHEDULED_KINDS: ReadonlyMap<string, string> = new Map(
  [...KINDS.values()].flatMap((d) => (d.scheduleField ? [[d.kind, d.scheduleField] as const] : [])),
);

/**
 * The stable spread of a resource in ms: FNV-1a of its id mod SPREAD_SECONDS, divided by the time
 * scale and rounded down to whole seconds (cron ticks fall on whole seconds; a test service at time
 * scale 60 or more, whose clock is set to a tick, has no spread).
 */
export function spreadMs(resourceId: string, timeScale = 1): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < resourceId.length; i++) {
    h ^= resourceId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return Math.floor(((h >>> 0) % SPREAD_SECONDS) / timeScale) * 1000;
}

export interface ScheduleOwner {
  id: string;
  tenantId: string;
  projectId: string;
  kind: string;
}

/** The schedule expression a resource's data holds, or null (none, or not a scheduled kind). */
export function scheduleOf(kind: string, data: Record<string, unknown>): string | null {
  const field = SCHEDULED_KINDS.get(kind);
  const value = field ? data[field] : undefined;
  return typeof value === 'string' && value ? value : null;
}

/**
 * Sets (or replaces) the schedule row of a resource, its first tick strictly after `fromMs`.
 * An expression that does not parse (validated on write; only an old row could hold one) removes it.
 * `onlyIfMissing` is the backfill: a row written meanwhile by the store wins.
 */
export async function putSchedule(
  q: Queryable,
  r: ScheduleOwner,
  expression: string,
  fromMs: number,
  timeScale: number,
  onlyIfMissing = false,
): Promise<void> {
  const values = scheduleRow(r, expression, fromMs, timeScale);
  if (!values) return removeSchedule(q, r.id);
  await q.run(
    `${INSERT_SCHEDULES} ${SCHEDULE_PLACEHOLDERS} ON CONFLICT (resource_id) ${
      onlyIfMissing
        ? 'DO NOTHING'
        : 'DO UPDATE SET expression = excluded.expression, tick = excluded.tick, offset_ms = excluded.offset_ms, next_due_at = excluded.next_due_at'
    }`,
    values,
  );
}

/**
 * The schedule rows of new resources (ResourceStore.insertMany), in statements of up to 256 rows,
 * padded to a power of two (a repeated row is skipped by ON CONFLICT DO NOTHING). Values as putSchedule's.
 */
export async function putNewSchedules(
  q: Queryable,
  owners: readonly { r: ScheduleOwner; expression: string }[],
  fromMs: number,
  timeScale: number,
): Promise<void> {
  const rows: SqlValue[][] = [];
  for (const { r, expression } of owners) {
    const values = scheduleRow(r, expression, fromMs, timeScale);
    if (values) rows.push(values);
  }
  await insertRows(q, rows, (values) => `${INSERT_SCHEDULES} ${values} ON CONFLICT (resource_id) DO NOTHING`);
}

const INSERT_SCHEDULES =
  'INSERT INTO schedules (resource_id, tenant_id, project_id, kind, expression, tick, offset_ms, next_due_at) VALUES';
const SCHEDULE_PLACEHOLDERS = '(?, ?, ?, ?, ?, ?, ?, ?)';

/**
 * A schedule row's values, in the table's column order (resource_id first; its first tick strictly
 * after `fromMs`), or undefined when the expression does not parse.
 */
export function scheduleRow(r: ScheduleOwner, expression: string, fromMs: number, timeScale: number): SqlValue[] | undefined {
  let tick: number;
  try {
    tick = nextTickAfter(expression, fromMs);
  } catch {
    return undefined;
  }
  const offset = spreadMs(r.id, timeScale);
  return [r.id, r.tenantId, r.projectId, r.kind, expression, tick, offset, tick + offset];
}

export async function removeSchedule(q: Queryable, resourceId: string): Promise<void> {
  await q.run('DELETE FROM schedules WHERE resource_id = ?', [resourceId]);
}
