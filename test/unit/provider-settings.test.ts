import { describe, expect, it } from 'vitest';
import { writableKinds } from '../../src/kinds/index.js';
import { healthDiagnostics } from '../../src/provider/checks.js';
import { ResourceHandler } from '../../src/provider/resource.js';
import { objectToApi, resourceSpecs, schemaMessage } from '../../src/provider/schema.js';
import { parseDuration, settingErrors, timeoutOf } from '../../src/provider/settings.js';
import { UNKNOWN } from '../../src/provider/values.js';

/** The provider-only settings (timeouts, run_setup_tests) and health diagnostics, from the descriptors. */
const specOf = (pred: (d: ReturnType<typeof writableKinds>[number]) => unknown) =>
  [...resourceSpecs().values()].find((s) => pred(s.descriptor))!;
const provisioned = specOf((d) => d.provisioning);
const tested = specOf((d) => d.testAction);

describe('provider settings', () => {
  it('go durations: units, sums and fractions; anything else is refused', () => {
    expect(parseDuration('30m')).toBe(1_800_000);
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('1.5s')).toBe(1500);
    expect(parseDuration('250ms')).toBe(250);
    for (const bad of ['', '30', 'soon', '-1m', '0s', '1d', 'm']) expect(parseDuration(bad), bad).toBeNull();
  });

  it('timeouts come from the block, else the documented defaults', () => {
    expect(timeoutOf(null, 'create')).toEqual({ ms: 1_800_000, text: '30m', configured: false });
    expect(timeoutOf({ timeouts: null }, 'delete')).toMatchObject({ text: '20m', configured: false });
    expect(timeoutOf({ timeouts: { create: '1s', update: null, delete: null } }, 'create')).toEqual({
      ms: 1000,
      text: '1s',
      configured: true,
    });
    expect(timeoutOf({ timeouts: { create: '1s', update: null, delete: null } }, 'update')).toMatchObject({ text: '30m' });
    expect(settingErrors({ timeouts: { create: 'soon', update: '10m', delete: null } })).toEqual([
      { path: ['timeouts', 'create'], message: expect.stringContaining('"soon" is not a duration') },
    ]);
  });

  it('only kinds whose descriptor asks for them get the settings', () => {
    for (const spec of resourceSpecs().values()) {
      const names = spec.attrs.filter((a) => a.synthetic === 'setting').map((a) => a.name);
      expect(names.includes('timeouts'), spec.typeName).toBe(!!spec.descriptor.provisioning);
      expect(names.includes('run_setup_tests'), spec.typeName).toBe(!!spec.descriptor.testAction);
    }
  });

  it('timeouts is served as a single nested block, run_setup_tests as an optional bool', () => {
    const block = (schemaMessage(provisioned) as any).block;
    expect(block.attributes.map((a: any) => a.name)).not.toContain('timeouts');
    expect(block.block_types).toEqual([expect.objectContaining({ type_name: 'timeouts', nesting: 1 })]);
    expect(block.block_types[0].block.attributes.map((a: any) => [a.name, a.optional, a.computed])).toEqual([
      ['create', true, false],
      ['update', true, false],
      ['delete', true, false],
    ]);
    const rst = (schemaMessage(tested) as any).block.attributes.find((a: any) => a.name === 'run_setup_tests');
    expect(rst).toMatchObject({ optional: true, computed: true, type: Buffer.from('"bool"') });
  });

  it('settings never reach the API; run_setup_tests plans as false when left out', () => {
    const h = new ResourceHandler(tested, () => {
      throw new Error('no API in this test');
    });
    const config = { project_id: 'prj_1', name: 'c', connector_type: 'mysql', run_setup_tests: null };
    const { planned } = h.plan(null, config, config);
    expect(planned!.run_setup_tests).toBe(false);
    expect(objectToApi(tested.attrs, { ...planned!, run_setup_tests: true })).not.toHaveProperty('run_setup_tests');
    // Imported or older states get the default, so they plan as no change.
    expect(h.upgrade({ id: 'con_1', name: 'c' })!.run_setup_tests).toBe(false);
  });
});

describe('health after writes and reads', () => {
  const prior = (status: string, last_error: string | null) => ({
    id: 'inf_1',
    project_id: 'prj_1',
    name: 'wh',
    resource_type: 'warehouse',
    provider_name: 'aws',
    region: 'mars-1',
    config: {},
    labels: {},
    status,
    last_error,
    created_at: '2025-01-01T00:00:00Z',
    updated_at: '2025-01-01T00:00:00Z',
    timeouts: null,
  });

  it('degraded: a warning naming the resource and the reason, or an error when asked', () => {
    const [w] = healthDiagnostics(provisioned, prior('failed', 'aws has no region "mars-1"'));
    expect(w).toMatchObject({
      severity: 2,
      summary: 'dataplatform_infrastructure_resource "wh" is degraded: status is failed: aws has no region "mars-1"',
    });
    expect(healthDiagnostics(provisioned, prior('failed', 'x'), { degradedIsError: true })[0].severity).toBe(1);
    expect(healthDiagnostics(provisioned, prior('provisioned', null))).toEqual([]);
    expect(healthDiagnostics(provisioned, prior('provisioning', null))).toEqual([]);
    expect(healthDiagnostics(provisioned, prior('provisioning', null), { afterWait: true })[0].severity).toBe(2);
  });

  it('a provisioned kind the platform failed plans an update (status unknown), so apply provisions again', () => {
    const h = new ResourceHandler(provisioned, () => {
      throw new Error('no API in this test');
    });
    const config = { ...prior('failed', 'x'), id: null, status: null, last_error: null, created_at: null, updated_at: null };
    const failed = h.plan(prior('failed', 'x'), config, config);
    expect(failed.replace).toEqual([]);
    expect(failed.planned!.status).toBe(UNKNOWN);
    const fine = h.plan(prior('provisioned', null), config, config);
    expect(fine.planned!.status).toBe('provisioned');
  });
});
