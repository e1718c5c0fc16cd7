import { describe, expect, it } from 'vitest';
import { ResourceStore } from '../../../src/service/store/resources.js';
import type { Db, Queryable } from '../../../src/service/store/db.js';
import type { SecretCipher } from '../../../src/service/secrets/cipher.js';

describe('the store tells whoever wired it about writes it cannot act on itself', () => {
  it("hears of a project's deletion before its rows (its API keys among them) go", async () => {
    const events: string[] = [];
    const q = {
      run: async (sql: string) => {
        events.push(sql.split(' WHERE')[0]);
        return { changes: 0 };
      },
    } as unknown as Queryable;
    const store = new ResourceStore({ dialect: 'sqlite' } as Db, {} as SecretCipher, undefined, {
      projectContentsDeleted: (tenantId, projectId) => events.push(`hook ${tenantId} ${projectId}`),
    });
    await store.deleteProjectContents('tnt_1', 'prj_1', q);
    expect(events).toEqual([
      'hook tnt_1 prj_1',
      'DELETE FROM resources',
      'DELETE FROM schedules',
      'DELETE FROM resource_refs',
      'DELETE FROM api_key_hashes',
    ]);
  });

  it('works without hooks', async () => {
    const q = { run: async () => ({ changes: 0 }) } as unknown as Queryable;
    await expect(
      new ResourceStore({ dialect: 'sqlite' } as Db, {} as SecretCipher).deleteProjectContents('t', 'p', q),
    ).resolves.toBeUndefined();
  });
});
