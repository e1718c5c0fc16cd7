import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { BYSTANDER_MAX_MS, whileServingOther } from './support.js';

/**
 * Odd but well-formed input (issue 17): timestamps JSON Schema's date-time lets through but the
 * store cannot hold (a leap second was a 500), and names that read differently from their
 * bytes or are not text at all. Each is a validation_error naming the field, never a 500,
 * and another tenant is served meanwhile.
 */
let svc: TestService;
let t: TestTenant;
let bystander: TestTenant;
let projectId: string;

beforeAll(async () => {
  svc = await startTestService();
  [t, bystander] = await Promise.all([svc.tenant(), svc.tenant()]);
  projectId = (await svc.project(t, 'odd')).id;
});
afterAll(() => svc?.close());

const expectInvalid = (res: { status: number; body: any }, field: string) => {
  expect(res.status, JSON.stringify(res.body)).toBe(400);
  expect(res.body.error.code).toBe('validation_error');
  expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
};

const ODD_TIMESTAMPS = [
  '2016-12-31T23:59:60Z', // a real leap second: Date cannot hold it
  '2016-12-31T23:59:60+00:00',
  '2024-13-01T00:00:00Z',
  '2024-02-30T00:00:00Z',
  '2024-01-01T24:00:00Z',
  '0000-01-01T00:00:00Z',
  '275760-09-13T00:00:00Z',
  '9999-12-31T23:59:59-01:00', // year 10000 in UTC
  '2024-01-01T00:00:00', // no zone
  '2024-01-01',
];

describe('timestamps in query parameters', () => {
  test('every odd since/until is a validation_error naming it, on the project and the tenant audit log', async () => {
    const { probe } = await whileServingOther(svc, bystander, async () => {
      for (const value of ODD_TIMESTAMPS) {
        for (const param of ['since', 'until']) {
          expectInvalid(await svc.call(t, 'GET', `/projects/${projectId}/audit-logs`, { query: { [param]: value } }), param);
          expectInvalid(await svc.call(t, 'GET', '/audit-logs', { query: { [param]: value } }), param);
        }
      }
    });
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
  });

  test('good timestamps with offsets and fractions still filter as instants', async () => {
    const page = await svc.ok(t, 'GET', `/projects/${projectId}/audit-logs`, {
      query: { since: '2000-01-01T01:00:00.5+01:00', until: '9999-12-31T23:59:59Z' },
    });
    expect(page.data.map((e: { action: string }) => e.action)).toContain('project.create');
    expectInvalid(
      await svc.call(t, 'GET', `/projects/${projectId}/audit-logs`, {
        query: { since: '2024-01-01T01:00:00+01:00', until: '2024-01-01T00:00:00Z' },
      }),
      'until',
    );
  });
});

describe('names', () => {
  const BAD_NAMES: [string, string][] = [
    ['right-to-left override', 'invoice\u202Egpj.exe'],
    ['left-to-right embedding', 'a\u202Ab'],
    ['isolate', 'a\u2066b\u2069'],
    ['right-to-left mark', 'prod\u200F'],
    ['lone high surrogate', 'broken\uD800'],
    ['lone low surrogate', '\uDC00broken'],
    ['C0 control', 'bell\u0007'],
    ['C1 control', 'next\u0085line'],
    ['DEL', 'del\u007F'],
    ['line separator', 'two\u2028lines'],
  ];

  test('project, connector, channel, pipeline step and user display names refuse each, naming the field', async () => {
    const base = `/projects/${projectId}`;
    const { probe } = await whileServingOther(svc, bystander, async () => {
      for (const [, name] of BAD_NAMES) {
        expectInvalid(await svc.call(t, 'POST', '/projects', { body: { name } }), 'name');
        expectInvalid(await svc.call(t, 'PATCH', `/projects/${projectId}`, { body: { name } }), 'name');
        expectInvalid(
          await svc.call(t, 'POST', `${base}/notification-channels`, {
            body: { name, type: 'email', config: { email_addresses: ['a@example.com'] } },
          }),
          'name',
        );
        expectInvalid(
          await svc.call(t, 'POST', `${base}/pipelines`, {
            body: { name: 'p', steps: [{ name, type: 'notification', channel_id: 'chn_x' }] },
          }),
          'steps[0].name',
        );
        expectInvalid(
          await svc.call(t, 'POST', '/users', {
            body: {
              email: `u${Math.random().toString(36).slice(2)}@${t.slug}.test`,
              name,
              role: 'read-only',
              password: 'users-password-1',
            },
          }),
          'name',
        );
      }
    });
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
    // Nothing was created or renamed by the refused requests.
    const projects = await svc.ok(t, 'GET', '/projects');
    expect(projects.data.map((p: { name: string }) => p.name)).toEqual(['odd']);
  });

  test('the message says which character and where', async () => {
    const res = await svc.call(t, 'POST', '/projects', { body: { name: 'invoice\u202Egpj.exe' } });
    expect(res.body.error.details).toContainEqual({
      field: 'name',
      message: 'must not contain a bidirectional control character (U+202E at position 7)',
    });
  });

  test('letters of every script, emoji and joiners stay allowed', async () => {
    for (const name of ['données', 'データ基盤', 'مشروع', '👩‍💻 team', 'क्‍ष']) {
      const created = await svc.ok(t, 'POST', `/projects/${projectId}/notification-channels`, {
        body: { name, type: 'email', config: { email_addresses: ['a@example.com'] } },
      });
      expect(created.name).toBe(name);
    }
  });
});
