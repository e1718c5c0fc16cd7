import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/index.js';

/** The caps the service enforces with 422 (`x-max-items`) are in the YAML schema too: dpctl validate refuses first. */
describe('list caps in YAML', () => {
  const dir = mkdtempSync(join(tmpdir(), 'dp-caps-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const pipeline = (steps: number) =>
    [
      'apiVersion: dataplatform/v1',
      'kind: Project',
      'metadata: { name: caps }',
      '---',
      'apiVersion: dataplatform/v1',
      'kind: NotificationChannel',
      'metadata: { name: team, project: caps }',
      'spec: { type: email, config: { email_addresses: [team@example.com] } }',
      '---',
      'apiVersion: dataplatform/v1',
      'kind: Pipeline',
      'metadata: { name: long, project: caps }',
      'spec:',
      '  steps:',
      ...Array.from({ length: steps }, (_, i) => `    - { name: s${i}, type: notification, channel: team }`),
      '',
    ].join('\n');

  it('500 pipeline steps are valid, 501 are refused at the steps field', () => {
    writeFileSync(join(dir, 'ok.yaml'), pipeline(500));
    expect(loadConfig([join(dir, 'ok.yaml')]).errors).toEqual([]);
    writeFileSync(join(dir, 'long.yaml'), pipeline(501));
    const { errors } = loadConfig([join(dir, 'long.yaml')]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ field: 'spec.steps', message: expect.stringContaining('500') });
  });
});
