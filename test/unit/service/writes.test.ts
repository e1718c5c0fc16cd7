import { describe, expect, it } from 'vitest';
import { kind } from '../../../src/kinds/index.js';
import { initialComputed, isUniqueViolation, lockRow, ordered } from '../../../src/service/writes.js';
import { alreadyExists } from '../../../src/service/errors.js';
import type { Queryable } from '../../../src/service/store/db.js';

/** A transaction that records its statements and finds the row when `found`. */
function recorder(found: boolean) {
  const sql: string[] = [];
  const q = {
    get: async (text: string) => {
      sql.push(text);
      return found ? { ok: 1 } : undefined;
    },
  } as unknown as Queryable;
  return { q, sql };
}

describe('shared write helpers', () => {
  it('locks a row FOR UPDATE or FOR SHARE on PostgreSQL, and only reads it on SQLite', async () => {
    const pg = recorder(true);
    expect(await lockRow({ db: { dialect: 'postgres' } as never }, pg.q, 'tnt_1', 'prj_1')).toBe(true);
    expect(await lockRow({ db: { dialect: 'postgres' } as never }, pg.q, 'tnt_1', 'prj_1', 'share')).toBe(true);
    expect(pg.sql).toEqual([
      'SELECT 1 AS ok FROM resources WHERE id = ? AND tenant_id = ? FOR UPDATE',
      'SELECT 1 AS ok FROM resources WHERE id = ? AND tenant_id = ? FOR SHARE',
    ]);
    const lite = recorder(false);
    expect(await lockRow({ db: { dialect: 'sqlite' } as never }, lite.q, 'tnt_1', 'prj_1')).toBe(false);
    expect(lite.sql).toEqual(['SELECT 1 AS ok FROM resources WHERE id = ? AND tenant_id = ?']);
  });

  it('starts a resource with its id, project, timestamps and declared initial values', () => {
    const d = kind('connector');
    const out = initialComputed(d, 'con_1', 'prj_1', '2026-01-01T00:00:00.000Z');
    expect(out).toMatchObject({
      id: 'con_1',
      project_id: 'prj_1',
      created_at: '2026-01-01T00:00:00.000Z',
      updated_at: '2026-01-01T00:00:00.000Z',
    });
    expect(Object.keys(out)).toEqual(expect.arrayContaining(['status', 'last_sync_at', 'last_error']));
    expect(initialComputed(kind('user'), 'usr_1', '', 'now')).not.toHaveProperty('project_id');
  });

  it("orders fields as the kind's schema declares them, dropping unknown ones", () => {
    const d = kind('connector');
    const out = ordered(d, { updated_at: 'u', name: 'db', id: 'con_1', stray: 1 });
    expect(Object.keys(out)).toEqual(Object.keys(d.schema.properties!).filter((k) => ['updated_at', 'name', 'id'].includes(k)));
  });

  it('tells a unique-index violation on either store from other errors', () => {
    expect(isUniqueViolation({ code: 'SQLITE_CONSTRAINT_UNIQUE' })).toBe(true);
    expect(isUniqueViolation({ code: '23505' })).toBe(true);
    expect(isUniqueViolation({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' })).toBe(false);
    expect(isUniqueViolation(new Error('x'))).toBe(false);
  });

  it('says an identity is taken in one sentence, with where when given', () => {
    const e = alreadyExists('A connector', 'name', 'orders', 'in this project');
    expect([e.code, e.status, e.message]).toEqual(['conflict', 409, 'A connector with name "orders" already exists in this project']);
    expect(alreadyExists('A user', 'email', 'a@b.c').message).toBe('A user with email "a@b.c" already exists');
  });
});
