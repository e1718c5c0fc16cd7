import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { DataPlatformClient } from '../../../src/client/index.js';
import { preparePlan, reconcile, type EngineOptions } from '../../../src/engine/index.js';
import { applyGraph } from '../../../src/engine/apply.js';
import { kind } from '../../../src/kinds/index.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { clientFor } from './helpers.js';

/**
 * A kind with a cap per scope (`x-max-per-scope`): a tenant holds at most 100 SSO providers. An
 * apply with --prune that renames one in a full tenant must free the old place before it takes
 * the new one; creating first (the order everywhere else) would be refused with 409 "full" and
 * need a second run.
 */
const CAP = kind('sso_provider').maxPerScope!;
const sso = (name: string) =>
  `apiVersion: dataplatform/v1\nkind: SsoProvider\nmetadata:\n  name: ${name}\nspec:\n  protocol: google\n  client_id: c\n`;
const opts = (extra: Partial<EngineOptions> = {}): EngineOptions => ({ sourceId: 'platform', env: {}, prune: true, ...extra });

function writeConfig(dir: string, names: string[]): void {
  writeFileSync(join(dir, 'sso.yaml'), names.map(sso).join('---\n'));
}

describe('apply --prune in a scope at its cap', () => {
  let svc: TestService;
  let t: TestTenant;
  let client: DataPlatformClient;
  const dir = join(mkdtempSync(join(tmpdir(), 'dp-engine-caps-')), 'platform');
  const names = Array.from({ length: CAP }, (_, i) => `sso-${String(i).padStart(3, '0')}`);

  beforeAll(async () => {
    svc = await startTestService({ rateLimit: 1_000_000 });
    t = await svc.tenant();
    client = clientFor(svc, t);
    mkdirSync(dir);
  });
  afterAll(async () => {
    await client?.close();
    await svc?.close();
  });

  test(`renaming one of ${CAP} SSO providers converges in one run: the prune goes first`, async () => {
    expect(CAP).toBe(100);
    writeConfig(dir, names);
    const filled = await reconcile(client, [dir], opts());
    expect(filled.result!.converged).toBe(true);
    expect(filled.plan.summary.create).toBe(CAP);

    writeConfig(dir, [...names.slice(0, -1), 'sso-renamed']);
    const lines: string[] = [];
    const renamed = await reconcile(client, [dir], { ...opts(), onProgress: (line) => lines.push(line) });
    expect(renamed.plan.summary).toMatchObject({ create: 1, delete: 1 });
    expect(renamed.result!.outcomes.filter((o) => o.status !== 'done')).toEqual([]);
    expect(renamed.result!.converged).toBe(true);
    const deleted = lines.findIndex((l) => l.startsWith('- ') && l.includes('sso-099'));
    const created = lines.findIndex((l) => l.startsWith('+ ') && l.includes('sso-renamed'));
    expect(deleted).toBeGreaterThanOrEqual(0);
    expect(created).toBeGreaterThan(deleted);
    const live = await client.resourcesOf('sso_provider', {}).listAll();
    expect(live).toHaveLength(CAP);
    expect(live.map((p) => p.name)).toContain('sso-renamed');
    expect(live.map((p) => p.name)).not.toContain('sso-099');
  });

  test('with a free place, a create does not wait for a prune (a failed create leaves the old one in place)', async () => {
    writeConfig(dir, names.slice(0, -2).concat('sso-renamed'));
    await reconcile(client, [dir], opts());
    writeConfig(dir, names.slice(0, -2).concat('sso-renamed-again'));
    const { plan, state, documents } = await preparePlan(client, [dir], opts());
    expect(plan.summary).toMatchObject({ create: 1, delete: 1 });
    const descriptors = new Map(documents.map((d) => [d.descriptor.kind, d.descriptor]));
    const graph = applyGraph(plan, descriptors, state);
    const create = [...graph.nodes.values()].find((n) => n.step === 'write' && n.change.name === 'sso-renamed-again')!;
    expect([...create.deps]).toEqual([]);
  });

  test('a prune that waits for a referrer is not paired with a create: no cycle through the referrer', async () => {
    // A full project of classifications; a masking policy moves from the renamed one to its new name.
    // delete(old) waits for the policy's update, which waits for create(new): pairing create(new)
    // with delete(old) would close a cycle, and the apply would fail every one of them.
    const classes = kind('classification').maxPerScope!;
    const gov = join(mkdtempSync(join(tmpdir(), 'dp-engine-caps-')), 'platform');
    mkdirSync(gov);
    const config = (renamed: string) => {
      const docs = [`apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: gov\nspec:\n  description: governance\n`];
      for (let i = 0; i < classes; i++) {
        const name = i === classes - 1 ? renamed : `cls-${i}`;
        docs.push(
          `apiVersion: dataplatform/v1\nkind: Classification\nmetadata:\n  name: ${name}\n  project: gov\nspec:\n  sensitivity: internal\n`,
        );
      }
      docs.push(
        `apiVersion: dataplatform/v1\nkind: MaskingPolicy\nmetadata:\n  name: mask\n  project: gov\nspec:\n  classification: ${renamed}\n  method: hash\n`,
      );
      writeFileSync(join(gov, 'gov.yaml'), docs.join('---\n'));
    };
    config('cls-last');
    const filled = await reconcile(client, [gov], opts({ sourceId: 'gov' }));
    expect(filled.plan.errors).toEqual([]);
    expect(filled.result!.converged).toBe(true);
    config('cls-renamed');
    const { plan, state, documents } = await preparePlan(client, [gov], opts({ sourceId: 'gov' }));
    expect(plan.summary).toMatchObject({ create: 1, update: 1, delete: 1 });
    const graph = applyGraph(plan, new Map(documents.map((d) => [d.descriptor.kind, d.descriptor])), state);
    const node = (step: string, name: string) => [...graph.nodes.values()].find((n) => n.step === step && n.change.name === name)!;
    expect([...node('delete', 'cls-last').deps]).toEqual([node('write', 'mask').id]);
    expect([...node('write', 'cls-renamed').deps]).not.toContain(node('delete', 'cls-last').id);
  }, 60_000);
});
