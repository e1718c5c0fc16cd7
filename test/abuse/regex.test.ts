import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { createSourceDb, type SourceDb } from '../integration/runtime/helpers.js';
import { BYSTANDER_MAX_MS, whileServingOther } from './support.js';

/**
 * ReDoS: a classification pattern that backtracks exponentially in V8, stored and evaluated
 * against column names of a real PostgreSQL source on every schema read. Patterns run on RE2
 * (linear time), and what RE2 cannot run or what is too big is refused when saved.
 */
let svc: TestService;
let attacker: TestTenant;
let bystander: TestTenant;
let src: SourceDb;
let base: string;

/** 2^n backtracking steps for (a+)+$ in V8: 25 blocks for seconds (a failure that ends), 62 for ever. */
const evilColumn = (n: number) => `${'a'.repeat(n)}!`;

beforeAll(async () => {
  [svc, src] = await Promise.all([startTestService({ sourceTimeout: 5 }), createSourceDb(1)]);
  const c = new pg.Client({ connectionString: src.adminUrl });
  await c.connect();
  try {
    // PostgreSQL names are at most 63 bytes: 62 a's and the '!' are the longest the source allows.
    await c.query(`
      CREATE SCHEMA evil_short; CREATE TABLE evil_short.t ("${evilColumn(25)}" int);
      CREATE SCHEMA evil_long; CREATE TABLE evil_long.t ("${evilColumn(62)}" int, plain_aaa int);
    `);
  } finally {
    await c.end();
  }
  [attacker, bystander] = await Promise.all([svc.tenant(), svc.tenant()]);
  base = `/projects/${(await svc.project(attacker, 'redos')).id}`;
});
afterAll(() => svc?.close());

const connector = (name: string, schema: string) =>
  svc.ok(attacker, 'POST', `${base}/connectors`, {
    body: {
      name,
      connector_type: 'postgresql',
      config: { host: src.host, port: src.port, database: src.database, schema, ssl_mode: 'prefer' },
      credentials: { username: src.admin.username, password: 'unused' },
    },
  });

/** Reads a connector's schema while the bystander is probed; the read's own duration too. */
async function readSchema(id: string) {
  const { result, probe } = await whileServingOther(svc, bystander, async () => {
    const started = performance.now();
    const res = await svc.call(attacker, 'GET', `${base}/connectors/${id}/schema`);
    return { res, ms: performance.now() - started };
  });
  return { ...result, probe };
}

type Column = { name: string; classification?: string };

describe('a stored (a+)+$ against a column of a\'s and a "!"', () => {
  it('answers the schema read at once and the other tenant is served meanwhile', async () => {
    const created = await svc.ok(attacker, 'POST', `${base}/classifications`, {
      body: { name: 'evil', sensitivity: 'restricted', column_matchers: [{ column_pattern: '(a+)+$', data_type: 'int(eger)?|bigint' }] },
    });
    expect(created.column_matchers[0].column_pattern).toBe('(a+)+$');
    const [short, long] = await Promise.all([connector('evil-short', 'evil_short'), connector('evil-long', 'evil_long')]);

    // 25 a's first: without a linear-time engine this blocks for seconds and fails here, rather
    // than the 62-a read, which would block this very process for ever.
    for (const c of [short, long]) {
      const { res, ms, probe } = await readSchema(c.id);
      expect(res.status, res.text).toBe(200);
      expect(res.body.error).toBeNull();
      expect(ms).toBeLessThan(BYSTANDER_MAX_MS);
      expect(probe.failures).toEqual([]);
      expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
    }
    // The classification still works: it marks what it matches, and only that.
    const { res } = await readSchema(long.id);
    const columns = res.body.tables[0].columns as Column[];
    expect(columns.map((col) => [col.name, col.classification ?? null])).toEqual([
      [evilColumn(62), null],
      ['plain_aaa', 'evil'],
    ]);
  });
});

describe('patterns refused when saved, the field named', () => {
  const attempt = (body: unknown, method = 'POST', path = `${base}/classifications`) =>
    whileServingOther(svc, bystander, () => svc.call(attacker, method, path, { body }));

  const expectRefused = async (run: ReturnType<typeof attempt>, field: string, message: RegExp) => {
    const { result: res, probe } = await run;
    expect(res.status, res.text).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
    expect(res.body.error.details).toEqual([{ field, message: expect.stringMatching(message) }]);
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
  };

  it('a backreference (RE2 has none)', async () => {
    await expectRefused(
      attempt({ name: 'backref', sensitivity: 'internal', column_matchers: [{ column_pattern: 'ok' }, { column_pattern: '(a)\\1' }] }),
      'column_matchers[1].column_pattern',
      /not a valid regular expression.*`\\1`/,
    );
  });

  it('lookahead in a data_type, on update', async () => {
    const c = await svc.ok(attacker, 'POST', `${base}/classifications`, { body: { name: 'to-patch', sensitivity: 'internal' } });
    await expectRefused(
      attempt({ column_matchers: [{ column_pattern: 'x', data_type: '(?=text)text' }] }, 'PATCH', `${base}/classifications/${c.id}`),
      'column_matchers[0].data_type',
      /not a valid regular expression.*unsupported Perl syntax/,
    );
  });

  it('a 10,000-character pattern', async () => {
    await expectRefused(
      attempt({ name: 'long', sensitivity: 'internal', column_matchers: [{ column_pattern: '(a+)+'.repeat(2_000) }] }),
      'column_matchers[0].column_pattern',
      /^must NOT have more than 512 characters$/,
    );
  });

  it('a pattern compiling to a huge program', async () => {
    await expectRefused(
      attempt({ name: 'huge', sensitivity: 'internal', column_matchers: [{ column_pattern: 'a{1000}'.repeat(73) }] }),
      'column_matchers[0].column_pattern',
      /^is too complex/,
    );
  });

  it('101 matchers: over the cap, 422 like every list a tenant grows', async () => {
    const column_matchers = Array.from({ length: 101 }, (_, i) => ({ column_pattern: `c${i}` }));
    const { result: res, probe } = await attempt({ name: 'many', sensitivity: 'internal', column_matchers });
    expect(res.status, res.text).toBe(422);
    expect(res.body.error.code).toBe('unprocessable_entity');
    expect(res.body.error.details).toEqual([{ field: 'column_matchers', message: expect.stringMatching(/100/) }]);
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
  });
});
