import { withPg } from './pg.js';
import { processCpuMs } from './proc.js';

/** CPU ms (user + system) of each PostgreSQL backend connected to one database, by pid, from /proc. */
export async function backendCpuMs(adminUrl: string, database: string): Promise<Map<number, number>> {
  const pids = await withPg(adminUrl, async (c) =>
    (await c.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [database])).rows.map((r) => r.pid),
  );
  const out = new Map<number, number>();
  for (const pid of pids) {
    try {
      out.set(pid, processCpuMs(pid));
    } catch {
      // a backend that ended meanwhile
    }
  }
  return out;
}

/**
 * Backend CPU spent between two readings: a backend seen twice counts its difference, one that started
 * meanwhile all of its time (its start-up included). One that ended meanwhile is missed (an undercount:
 * the service's pool keeps an idle connection for 120 s).
 */
export const backendDelta = (before: Map<number, number>, after: Map<number, number>) =>
  [...after].reduce((sum, [pid, ms]) => sum + ms - (before.get(pid) ?? 0), 0);
