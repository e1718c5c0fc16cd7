import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { staticResponses } from '../../../src/provider/provider.js';
import { loadDefinitions } from '../../../src/provider/proto.js';
import { kindsFingerprint, readStaticResponses, STATIC_METHODS, writeStaticResponses } from '../../../src/provider/static-responses.js';

const service = loadDefinitions()['tfplugin6.Provider'];
/** What Terraform reads from an answer: the message after a trip over the wire. */
const overTheWire = (method: (typeof STATIC_METHODS)[number], answer: object) =>
  service[method].responseDeserialize(service[method].responseSerialize(answer));

describe('schema answers encoded by the build', () => {
  it('are exactly what the provider computes from schemas/ now', () => {
    const built = readStaticResponses();
    if ('unusable' in built) throw new Error(built.unusable);
    const computed = staticResponses();
    for (const method of STATIC_METHODS) {
      expect(service[method].responseDeserialize(built.responses.get(method)!), method).toEqual(overTheWire(method, computed[method]));
    }
    const schema = service.GetProviderSchema.responseDeserialize(built.responses.get('GetProviderSchema')!) as {
      resource_schemas: Record<string, unknown>;
    };
    expect(Object.keys(schema.resource_schemas)).toContain('dataplatform_connector');
  });

  it('round-trip through the file, and are refused when made from other kinds or missing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dp-static-'));
    const path = join(dir, 'static-responses.json');
    const computed = staticResponses();
    const encoded = Object.fromEntries(STATIC_METHODS.map((m) => [m, service[m].responseSerialize(computed[m])])) as Record<
      (typeof STATIC_METHODS)[number],
      Buffer
    >;
    writeStaticResponses(encoded, path);
    const read = readStaticResponses(path);
    expect('responses' in read && read.responses.get('GetMetadata')!.equals(encoded.GetMetadata)).toBe(true);

    const stale = join(dir, 'stale.json');
    writeFileSync(stale, JSON.stringify({ kinds: `not-${kindsFingerprint()}`, responses: {} }));
    expect(readStaticResponses(stale)).toEqual({ unusable: expect.stringMatching(/other kinds .* run npm run build/) });
    expect(readStaticResponses(join(dir, 'missing.json'))).toEqual({
      unusable: expect.stringMatching(/cannot be read .* run npm run build/),
    });
  });

  it('the fingerprint changes with any kind file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dp-kinds-'));
    writeFileSync(join(dir, 'a.schema.json'), '{"kind":"A"}');
    const before = kindsFingerprint(dir);
    writeFileSync(join(dir, 'a.schema.json'), '{"kind":"B"}');
    expect(kindsFingerprint(dir)).not.toBe(before);
  });
});
