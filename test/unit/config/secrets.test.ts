import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, resolveSecrets, toApiBody, trimOneNewline } from '../../../src/config/index.js';
import { FIXTURES, lines } from './helpers.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('secretRef resolution', () => {
  it('reads env variables and files relative to the YAML file, dropping one trailing newline', () => {
    const { config } = loadConfig('.', { cwd: join(FIXTURES, 'valid') });
    const { secrets, errors } = resolveSecrets(config.documents, { env: { OPS_PASSWORD: 'ops-password-1', HOOK_SECRET: 'hook-secret' } });
    expect(errors).toEqual([]);
    expect(secrets.size).toBe(3);
    const connector = config.documents.find((d) => d.yamlKind === 'Connector')!;
    expect(secrets.get(connector, 'credentials.password')).toBe('s3cret-from-file'); // the file ends in "\n"
    const user = config.documents.find((d) => d.yamlKind === 'User')!;
    expect(secrets.get(user, 'password')).toBe('ops-password-1');
    const channel = config.documents.find((d) => d.name === 'b')!;
    expect((toApiBody(channel, () => 'x', secrets).config as Record<string, unknown>).signing_secret).toBe('hook-secret');
  });

  it("resolves a file from the YAML file's directory wherever the command runs", () => {
    const dir = mkdtempSync(join(tmpdir(), 'dp-config-'));
    dirs.push(dir);
    writeFileSync(
      join(dir, 'x.yaml'),
      [
        'apiVersion: dataplatform/v1',
        'kind: User',
        'metadata: { name: a@example.com }',
        'spec: { role: admin, password: { secretRef: { file: pw } } }',
        '',
      ].join('\n'),
    );
    writeFileSync(join(dir, 'pw'), 'line-one-password\r\n\n');
    const { config, errors } = loadConfig(join(dir, 'x.yaml'), { cwd: '/' });
    expect(errors).toEqual([]);
    const { secrets } = resolveSecrets(config.documents, { env: {} });
    // Only one newline goes: a value may itself end in a newline.
    expect(secrets.get(config.documents[0], 'password')).toBe('line-one-password\r\n');
    expect(trimOneNewline('a\r\n')).toBe('a');
    expect(trimOneNewline('a\n\n')).toBe('a\n');
    expect(trimOneNewline('a')).toBe('a');
  });

  it('points at the secretRef when a variable is unset, a file is missing or a value is not acceptable, never showing it', () => {
    const { config, errors } = loadConfig('.', { cwd: join(FIXTURES, 'secrets-unresolved') });
    expect(errors).toEqual([]);
    const resolved = resolveSecrets(config.documents, { env: { DP_TEST_SHORT_PASSWORD: 'short' } });
    expect(lines(resolved.errors)).toEqual([
      'refs.yaml:16:14: Connector/orders-db: spec.credentials.password: environment variable DP_TEST_UNSET_PASSWORD is not set',
      'refs.yaml:29:15: NotificationChannel/hook: spec.config.signing_secret: file missing/signing-secret.txt cannot be read: no such file',
      'refs.yaml:39:12: User/short@example.com: spec.password: the value of environment variable DP_TEST_SHORT_PASSWORD must NOT have fewer than 8 characters',
    ]);
    expect(resolved.secrets.size).toBe(0);
    expect(lines(resolveSecrets(config.documents, { env: { DP_TEST_UNSET_PASSWORD: '' } }).errors)[0]).toMatch(
      /DP_TEST_UNSET_PASSWORD is not set \(it is empty\)$/,
    );
  });

  it('names the file as found from where the command runs', () => {
    const { config } = loadConfig('test/fixtures/config/secrets-unresolved', { cwd: join(FIXTURES, '..', '..', '..') });
    const { errors } = resolveSecrets(config.documents, { env: {} });
    expect(lines(errors)[1]).toBe(
      'test/fixtures/config/secrets-unresolved/refs.yaml:29:15: NotificationChannel/hook: spec.config.signing_secret: file missing/signing-secret.txt cannot be read: no such file (looked for test/fixtures/config/secrets-unresolved/missing/signing-secret.txt)',
    );
  });
});
