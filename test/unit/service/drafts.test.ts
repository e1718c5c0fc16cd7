import { describe, expect, it } from 'vitest';
import { kind } from '../../../src/kinds/index.js';
import {
  applyNormalizers,
  articled,
  capitalised,
  clearField,
  createDraft,
  mergeSecrets,
  patchDraft,
  splitSecrets,
  withSecrets,
} from '../../../src/service/drafts.js';
import { ApiError } from '../../../src/service/errors.js';

const connector = kind('connector');
const dbt = kind('dbt_project');

/** The ApiError a step throws, as { code, message, details }. */
function thrown(fn: () => unknown) {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    const e = err as ApiError;
    return { code: e.code, message: e.message, details: e.details };
  }
  throw new Error('did not throw');
}

describe('the pure steps of a resource write', () => {
  it('names one resource of a kind with its article, and starts a sentence with it', () => {
    expect(articled(connector)).toBe('a connector');
    expect(articled({ title: 'API key' })).toBe('an api key');
    expect(capitalised(articled(connector))).toBe('A connector');
  });

  it('normalises in place: emails lower-cased and trimmed, cron expressions with single spaces', () => {
    const user = { email: '  Ada@Example.COM ' };
    applyNormalizers(kind('user'), user);
    expect(user.email).toBe('ada@example.com');
    const data: Record<string, unknown> = { schedule: ' 0  *\t* * * ', name: ' Orders ' };
    applyNormalizers(connector, data);
    expect(data).toEqual({ schedule: '0 * * * *', name: ' Orders ' });
  });

  it('splits write-only values off the body, and leaves null when there are none', () => {
    const body = { name: 'db', credentials: { username: 'u', password: 'p' } };
    const draft = splitSecrets(connector, body);
    expect(draft).toEqual({ data: { name: 'db', credentials: { username: 'u' } }, secrets: { credentials: { password: 'p' } } });
    expect(draft.data).toBe(body);
    expect(splitSecrets(connector, { name: 'db' }).secrets).toBeNull();
  });

  it('merges secrets over the stored ones and names the paths that changed', () => {
    const stored = { credentials: { password: 'old' }, token: 't' };
    expect(mergeSecrets(stored, { credentials: { password: 'new' } })).toEqual({
      merged: { credentials: { password: 'new' }, token: 't' },
      changed: ['credentials.password'],
    });
    expect(mergeSecrets(stored, { credentials: { password: 'old' } }).changed).toEqual([]);
    expect(mergeSecrets(null, null)).toEqual({ merged: null, changed: [] });
    // The stored object is not changed.
    expect(stored.credentials.password).toBe('old');
  });

  it('clears a field back to its default, or away, and the secrets under it', () => {
    const draft = {
      data: { name: 'db', credentials: { username: 'u' }, schedule: '0 * * * *' },
      secrets: { credentials: { password: 'p' } },
    };
    clearField(connector, draft, 'credentials');
    expect(draft).toEqual({ data: { name: 'db', credentials: {}, schedule: '0 * * * *' }, secrets: null });
    clearField(connector, draft, 'schedule');
    expect(draft.data).toEqual({ name: 'db', credentials: {} });
  });

  it('puts secrets back into a copy of the data for checks across fields', () => {
    const draft = { data: { credentials: { username: 'u' } }, secrets: { credentials: { password: 'p' } } };
    expect(withSecrets(draft)).toEqual({ credentials: { username: 'u', password: 'p' } });
    expect(draft.data).toEqual({ credentials: { username: 'u' } });
  });

  it('refuses a create whose models form a cycle, naming the field', () => {
    const models = [
      { name: 'a', depends_on: ['b'] },
      { name: 'b', depends_on: ['a'] },
    ];
    const e = thrown(() => createDraft(dbt, { name: 'x', repository: 'r', models }));
    expect(e.code).toBe('unprocessable_entity');
    expect(e.details?.[0].field).toMatch(/^models/);
  });

  describe('a PATCH merged into what is stored', () => {
    const stored = {
      data: { id: 'con_1', name: 'db', connector_type: 'postgresql', credentials: { username: 'u' }, selected_tables: ['t'] },
      secrets: { credentials: { password: 'old' } },
    };

    it('replaces fields given, keeps the others and omitted secrets, clears nulls to their default', () => {
      const { draft, changed } = patchDraft(connector, structuredClone(stored), { name: 'db2', selected_tables: null });
      expect(draft.data).toEqual({ ...stored.data, name: 'db2', selected_tables: [] });
      expect(draft.secrets).toEqual({ credentials: { password: 'old' } });
      expect(changed).toEqual([]);
    });

    it('takes a new secret and says it changed', () => {
      const { draft, changed } = patchDraft(connector, structuredClone(stored), { credentials: { username: 'u', password: 'new' } });
      expect(draft.data.credentials).toEqual({ username: 'u' });
      expect(draft.secrets).toEqual({ credentials: { password: 'new' } });
      expect(changed).toEqual(['credentials.password']);
    });

    it('refuses to change an immutable field, but accepts it unchanged', () => {
      expect(thrown(() => patchDraft(connector, structuredClone(stored), { connector_type: 'mysql' }))).toEqual({
        code: 'unprocessable_entity',
        message: 'connector_type cannot change; delete and re-create the connector instead',
        details: [{ field: 'connector_type', message: 'is immutable' }],
      });
      expect(() => patchDraft(connector, structuredClone(stored), { connector_type: 'postgresql' })).not.toThrow();
    });

    it('checks the merged whole against the create schema, computed fields aside', () => {
      const e = thrown(() => patchDraft(connector, structuredClone(stored), { name: '' }));
      expect(e.code).toBe('validation_error');
      expect(e.message).toMatch(/^The updated connector is invalid: name /);
    });
  });
});
