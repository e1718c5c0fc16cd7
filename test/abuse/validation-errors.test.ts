import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { MAX_FIELD_ERRORS } from '../../src/kinds/validator.js';
import { BYSTANDER_MAX_MS, whileServingOther } from './support.js';

/**
 * Validation errors multiplied by the body (security audit): request validation reports every
 * error Ajv finds, and one body of 1 MiB can break a rule 500,000 times. One detail (and one part
 * of the message) each was a 51 MB answer built in about 3 s of the event loop every tenant
 * shares, by any read-write key. The envelope now lists at most MAX_FIELD_ERRORS fields and says
 * how many more errors there were; the rest are counted, not mapped.
 */
let svc: TestService;
let attacker: TestTenant;
let bystander: TestTenant;
let connectors: string;

beforeAll(async () => {
  svc = await startTestService();
  [attacker, bystander] = await Promise.all([svc.tenant(), svc.tenant()]);
  connectors = `/projects/${(await svc.project(attacker, 'errors')).id}/connectors`;
});
afterAll(() => svc?.close());

/** Posts raw JSON (built as text: JSON.stringify of 500,000 items would take the test's own time) and times it. */
async function post(raw: string) {
  expect(Buffer.byteLength(raw)).toBeLessThan(1024 * 1024); // under the body limit: validated, not a 413
  const started = performance.now();
  const res = await svc.call(attacker, 'POST', connectors, { raw, headers: { 'content-type': 'application/json' } });
  return { res, ms: performance.now() - started };
}

const fieldsOf = (body: { error: { details: { field: string }[] } }) => body.error.details.map((d) => d.field);
const first = (n: number, name: (i: number) => string) => Array.from({ length: n }, (_, i) => name(i));

describe('a body that breaks a rule hundreds of thousands of times', () => {
  test('500,000 bad items of a capped list: refused by the cap before the schema is checked, and another tenant is served meanwhile', async () => {
    const raw = `{"name":"x","connector_type":"postgresql","selected_tables":[${Array(500_000).fill('1').join(',')}]}`;
    const { result, probe } = await whileServingOther(svc, bystander, async () => {
      const out = [];
      for (let i = 0; i < 3; i++) out.push(await post(raw));
      return out;
    });
    for (const { res, ms } of result) {
      // The cap's answer, before Ajv made 500,000 error objects (0.2 s of the event loop each time).
      expect(res.status).toBe(422);
      expect(res.body.error.details).toEqual([{ field: 'selected_tables', message: 'has 500000 items; at most 10000 are allowed' }]);
      // Was 51 MB in 3 to 4 s.
      expect(Buffer.byteLength(res.text)).toBeLessThan(20_000);
      expect(ms).toBeLessThan(BYSTANDER_MAX_MS);
    }
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
  }, 60_000);

  test('10,000 bad items (at the cap): the first MAX_FIELD_ERRORS are listed, the rest counted', async () => {
    const { res } = await post(`{"name":"x","connector_type":"postgresql","selected_tables":[${Array(10_000).fill('1').join(',')}]}`);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
    expect(fieldsOf(res.body)).toEqual(first(MAX_FIELD_ERRORS, (i) => `selected_tables[${i}]`));
    expect(res.body.error.details[0].message).toBe('must be string');
    expect(res.body.error.message).toMatch(/^Invalid body: selected_tables\[0\] must be string; selected_tables\[1\] must be string; /);
    expect(res.body.error.message).toMatch(/; and 9,900 more errors \(only the first 100 fields are listed\)$/);
  });

  test('60,000 unknown fields and 50,000 bad labels are capped the same way', async () => {
    const unknown = `{"name":"x","connector_type":"postgresql",${first(60_000, (i) => `"f${i}":1`).join(',')}}`;
    const labels = `{"name":"x","connector_type":"postgresql","labels":{${first(50_000, (i) => `"l${i}":1`).join(',')}}}`;
    const { result, probe } = await whileServingOther(svc, bystander, async () => [await post(unknown), await post(labels)]);
    const [u, l] = result;
    expect(u.res.status).toBe(400);
    expect(fieldsOf(u.res.body)).toEqual(first(MAX_FIELD_ERRORS, (i) => `f${i}`));
    expect(u.res.body.error.details[0].message).toBe('is not a known field');
    expect(u.res.body.error.message).toMatch(/; and 59,900 more errors \(only the first 100 fields are listed\)$/);
    expect(l.res.status).toBe(400);
    // The cap of 64 labels first, then each bad value.
    expect(fieldsOf(l.res.body)).toEqual(['labels', ...first(MAX_FIELD_ERRORS - 1, (i) => `labels.l${i}`)]);
    expect(l.res.body.error.details[0].message).toBe('must NOT have more than 64 properties');
    expect(l.res.body.error.message).toMatch(/; and 49,901 more errors \(only the first 100 fields are listed\)$/);
    // Were 4.8 and 4.1 MB.
    for (const { res } of result) expect(Buffer.byteLength(res.text)).toBeLessThan(20_000);
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
  }, 60_000);

  test('a body with a few errors still gets one detail per invalid field and no count', async () => {
    const { res } = await post('{"name":"","connector_type":"oracle","selected_tables":[1],"colour":"blue"}');
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body).sort()).toEqual(['colour', 'connector_type', 'name', 'selected_tables[0]']);
    expect(res.body.error.message).not.toMatch(/more error/);
  });
});
