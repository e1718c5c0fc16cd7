import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { bulkInsert } from '../../support/bulk.js';
import { runtimeOf } from '../../../src/service/runtime/runtime.js';
import { KEEP_PAST_MS, orphanStatement, retentionOf, sweepStatement, SWEPT_TABLES } from '../../../src/service/runtime/retention.js';
import { testStore } from '../../support/service.js';

/**
 * Tables that only grow are swept: schedule claims a day after their claim, tokens a day after
 * they expire; audit entries after --audit-retention days (400). At the scale (100,000 connectors every 15 minutes) schedule_ticks gained
 * 9.6 million rows a day and nothing ever deleted one.
 */
const OLD = 5_000;
const BUSY = 20_000;
const AUDIT_COLUMNS = ['id', 'tenant_id', 'ts', 'actor_type', 'action', 'resource_type', 'request_id', 'outcome', 'status_code', 'diff'];
const auditRow = (id: string, ts: string) => [
  id,
  'tnt_x',
  ts,
  'user',
  'update',
  'connector',
  'req',
  'success',
  200,
  '{"x":{"before":1,"after":2}}',
];
const DAY = 86_400_000;

describe('the retention sweep', () => {
  let svc: TestService;
  let t: TestTenant;

  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
  });
  afterAll(() => svc?.close());

  const count = async (table: string) => Number((await svc.service.ctx.db.get<{ n: number }>(`SELECT count(*) AS n FROM ${table}`))!.n);

  it('deletes the old claims and long-expired tokens in batches, and keeps the rest', async () => {
    const { db } = svc.service.ctx;
    const rt = runtimeOf(svc.service.ctx);
    const at = (ms: number) => new Date(rt.nowMs() + ms).toISOString();
    const [ticks, access, refresh, audit] = [
      await count('schedule_ticks'),
      await count('access_tokens'),
      await count('refresh_tokens'),
      await count('audit_logs'),
    ];
    // Audit entries: 7 past the retention, 2 within it (a day short).
    await bulkInsert(db, 'audit_logs', AUDIT_COLUMNS, 7, (n) => auditRow(`aud_old${n}`, at(-401 * DAY)));
    await bulkInsert(db, 'audit_logs', AUDIT_COLUMNS, 2, (n) => auditRow(`aud_kept${n}`, at(-399 * DAY)));
    const tickColumns = ['resource_id', 'tick', 'tenant_id', 'project_id', 'kind', 'instance_id', 'outcome', 'claimed_at'];
    const tick = (n: number, claimedAt: string) => [`con_${n}`, at(-n * 60_000), 'tnt_x', 'prj_x', 'connector', 'i', 'started', claimedAt];
    await bulkInsert(db, 'schedule_ticks', tickColumns, OLD, (n) => tick(n, at(-KEEP_PAST_MS - 60_000)));
    await bulkInsert(db, 'schedule_ticks', tickColumns, 10, (n) => tick(OLD + n, at(-KEEP_PAST_MS + 60_000)));
    await bulkInsert(db, 'access_tokens', ['hash', 'session_id', 'expires_at'], 3, (n) => [`old_${n}`, 'ses_x', at(-KEEP_PAST_MS - 1_000)]);
    await bulkInsert(db, 'access_tokens', ['hash', 'session_id', 'expires_at'], 2, (n) => [`expired_${n}`, 'ses_x', at(-1_000)]);
    await bulkInsert(db, 'refresh_tokens', ['hash', 'session_id', 'expires_at'], 4, (n) => [
      `old_${n}`,
      'ses_x',
      at(-KEEP_PAST_MS - 1_000),
    ]);

    const logged: string[] = [];
    const log = rt.log;
    rt.log = { error: () => undefined, info: (_o, msg) => void logged.push(msg) };
    try {
      expect(await retentionOf(rt).sweep()).toBe(OLD + 3 + 4 + 7);
    } finally {
      rt.log = log;
    }
    // Audit entries are what someone may miss (an upgrade brought the retention): each sweep that deletes some says so.
    expect(logged).toEqual(['deleted 7 audit log entries older than 400 days (--audit-retention; 0 keeps every entry)']);
    expect(await count('audit_logs')).toBe(audit + 2);
    expect(await count('schedule_ticks')).toBe(ticks + 10);
    expect(await count('access_tokens')).toBe(access + 2);
    expect(await count('refresh_tokens')).toBe(refresh);
    expect(await retentionOf(rt).sweep()).toBe(0);
    // The tenant's own sign-in is untouched.
    await svc.ok(t, 'GET', '/projects');
  });

  it('deletes a session with its last refresh token, and keeps one that still has a token', async () => {
    const { db } = svc.service.ctx;
    const rt = runtimeOf(svc.service.ctx);
    const at = (ms: number) => new Date(rt.nowMs() + ms).toISOString();
    const sessionColumns = ['id', 'tenant_id', 'user_id', 'created_at'];
    await bulkInsert(db, 'sessions', sessionColumns, 2, (n) => [`ses_${['dead', 'alive'][n]}`, 'tnt_x', 'usr_x', at(-40 * KEEP_PAST_MS)]);
    const tokens: [string, string, number][] = [
      ['dead_1', 'ses_dead', -KEEP_PAST_MS - 1_000],
      ['dead_2', 'ses_dead', -KEEP_PAST_MS - 2_000],
      ['alive_old', 'ses_alive', -KEEP_PAST_MS - 1_000],
      ['alive_new', 'ses_alive', 29 * KEEP_PAST_MS],
    ];
    await bulkInsert(db, 'refresh_tokens', ['hash', 'session_id', 'expires_at'], tokens.length, (n) => [
      tokens[n][0],
      tokens[n][1],
      at(tokens[n][2]),
    ]);
    expect(await retentionOf(rt).sweep()).toBe(3);
    const sessions = await db.all<{ id: string }>("SELECT id FROM sessions WHERE id IN ('ses_dead', 'ses_alive') ORDER BY id");
    expect(sessions.map((r) => r.id)).toEqual(['ses_alive']);
    await svc.ok(t, 'GET', '/projects');
  });

  it('finds the old rows through indexes, never a pass over the table (the plans of both stores)', async () => {
    const { db } = svc.service.ctx;
    const now = runtimeOf(svc.service.ctx).nowMs();

    // The tables of a busy service: many recent rows, none old enough.
    const recent = (n: number) => new Date(now - (n % 1_000) * 1_000).toISOString();
    const tickColumns = ['resource_id', 'tick', 'tenant_id', 'project_id', 'kind', 'instance_id', 'outcome', 'claimed_at'];
    const tickRow = (n: number) => [`con_busy${n}`, recent(n), 'tnt_x', 'prj_x', 'connector', 'i', 'started', recent(n)];
    await bulkInsert(db, 'schedule_ticks', tickColumns, BUSY, tickRow);
    for (const table of ['access_tokens', 'refresh_tokens'])
      await bulkInsert(db, table, ['hash', 'session_id', 'expires_at'], BUSY, (n) => [`busy_${n}`, `ses_busy${n}`, recent(n)]);
    await bulkInsert(db, 'audit_logs', AUDIT_COLUMNS, BUSY, (n) => auditRow(`aud_busy${n}`, recent(n)));
    await db.run('ANALYZE');
    for (const swept of SWEPT_TABLES) {
      // The statement as the sweep runs it: with the table's own cut-off.
      const before = new Date(now - (swept.keepMs?.(runtimeOf(svc.service.ctx)) ?? KEEP_PAST_MS)).toISOString();
      const statement = sweepStatement(swept).replace('?', `'${before}'`);
      if (testStore() === 'postgres') {
        const text = (await db.all<{ 'QUERY PLAN': string }>(`EXPLAIN ${statement}`)).map((r) => r['QUERY PLAN']).join('\n');
        expect(text, text).toMatch(new RegExp(`Index (Only )?Scan using ${swept.table}_(claimed|expiry|ts)`));
        expect(text, text).not.toMatch(/Seq Scan/);
      } else {
        const text = (await db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${statement}`)).map((r) => r.detail).join('\n');
        expect(text, text).toMatch(new RegExp(`USING (COVERING )?INDEX ${swept.table}_(claimed|expiry|ts)`));
        expect(text, text).not.toMatch(new RegExp(`SCAN ${swept.table}(?! USING)`));
      }
      if (!swept.owner) continue;
      // Whether an owner has rows left: through the owner column's index (migration 10).
      const orphans = orphanStatement(swept, 1).replace('?', "'ses_x'");
      const explain = testStore() === 'postgres' ? `EXPLAIN ${orphans}` : `EXPLAIN QUERY PLAN ${orphans}`;
      const plan = (await db.all<Record<string, string>>(explain)).map((r) => r['QUERY PLAN'] ?? r.detail).join('\n');
      expect(plan, plan).toMatch(/refresh_tokens_session/);
    }
  }, 60_000);
});
