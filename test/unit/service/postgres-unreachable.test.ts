import { describe, expect, it } from 'vitest';
import { openDb } from '../../../src/service/store/db.js';
import { closedPort } from '../../integration/runtime/helpers.js';

/** A replica started while its database is down stops with what to check, not a bare socket error. */
describe('dpctl serve with an unreachable PostgreSQL', () => {
  it('names --database-url, the host, port and database, and never the password', async () => {
    const port = await closedPort();
    const err = await openDb({ databaseUrl: `postgres://svc:s3cret-pw@127.0.0.1:${port}/platform`, sqlitePath: '' }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toBe(
      `cannot connect to the PostgreSQL database of --database-url (DP_DATABASE_URL) at 127.0.0.1:${port}/platform: connect ECONNREFUSED 127.0.0.1:${port}`,
    );
    expect(err?.message).not.toContain('s3cret-pw');
  });
});
