import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { pluginCertificate } from '../../src/provider/cert.js';
import { loadDefinitions } from '../../src/provider/proto.js';

const MAIN = join(import.meta.dirname, '..', '..', 'src', 'provider', 'main.ts');
const dir = mkdtempSync(join(tmpdir(), 'dp-provider-stats-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Starts the provider from source as Terraform would, asks for its schema twice, stops it with SIGTERM. */
async function schemaTwice(env: Record<string, string>): Promise<void> {
  const client = pluginCertificate();
  const Provider = (grpc.loadPackageDefinition(loadDefinitions()) as any).tfplugin6.Provider;
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
    env: { PATH: process.env.PATH, TF_PLUGIN_MAGIC_COOKIE: 'test', PLUGIN_CLIENT_CERT: client.certPem, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    child.once('error', reject);
    child.stdout.once('data', (d: Buffer) => resolve(d.toString().trim()));
  });
  const [, , , address, , certB64] = line.split('|');
  const serverPem = `-----BEGIN CERTIFICATE-----\n${Buffer.from(certB64, 'base64')
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')}\n-----END CERTIFICATE-----\n`;
  const stub = new Provider(
    `unix:${address}`,
    grpc.credentials.createSsl(Buffer.from(serverPem), Buffer.from(client.keyPem), Buffer.from(client.certPem)),
    {
      'grpc.ssl_target_name_override': 'localhost',
      'grpc.default_authority': 'localhost',
    },
  );
  for (let i = 0; i < 2; i++) {
    await new Promise<void>((resolve, reject) => stub.GetProviderSchema({}, (err: Error | null) => (err ? reject(err) : resolve())));
  }
  stub.close();
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

describe('DATAPLATFORM_PROVIDER_STATS (for bench/provider.ts)', () => {
  it('makes the process append its CPU, life and RPC counts to the file at exit', { timeout: 30_000 }, async () => {
    const file = join(dir, 'stats.jsonl');
    await schemaTwice({ DATAPLATFORM_PROVIDER_STATS: file });
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(1);
    const stats = JSON.parse(lines[0]);
    expect(stats).toMatchObject({ pid: expect.any(Number), lifeMs: expect.any(Number), cpuMs: expect.any(Number) });
    expect(stats.cpuMs).toBeGreaterThan(0);
    expect(stats.rpcs.GetProviderSchema.calls).toBe(2);
    // A process that only answers the schema (Terraform starts one per command) never loads the
    // implementation: loading it there held its shutdown ~100 ms.
    expect(stats.implementationLoaded).toBe(false);
  });

  it('records nothing without the variable', { timeout: 30_000 }, async () => {
    await schemaTwice({});
    expect(existsSync(join(dir, 'stats.jsonl'))).toBe(true); // only the first test's file
    expect(readFileSync(join(dir, 'stats.jsonl'), 'utf8').trim().split('\n')).toHaveLength(1);
  });
});
