import { readFileSync } from 'node:fs';
import pg from 'pg';

/** CPU ms (user + system) of each PostgreSQL backend connected to one database, by pid, from /proc. */
export async function backendCpuMs(adminUrl: string, database: string): Promise<Map<number, number>> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const pids = (await client.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [database])).rows.map(
      (r) => r.pid,
    );
    const out = new Map<number, number>();
    for (const pid of pids) {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        out.set(pid, (Number(fields[11]) + Number(fields[12])) * 10); // utime, stime (fields 14 and 15), USER_HZ 100
      } catch {
        // a backend that ended meanwhile
      }
    }
    return out;
  } finally {
    await client.end();
  }
}

/**
 * Backend CPU spent between two readings: a backend seen twice counts its difference, one that started
 * meanwhile all of its time (its start-up included). One that ended meanwhile is missed (an undercount:
 * the service's pool keeps an idle connection for 120 s).
 */
export const backendDelta = (before: Map<number, number>, after: Map<number, number>) =>
  [...after].reduce((sum, [pid, ms]) => sum + ms - (before.get(pid) ?? 0), 0);
