import { describe, expect, it } from 'vitest';
import { expectedChanges, unexpectedChange, type ExpectedProvisioning } from '../../../src/engine/provisioning.js';
import type { PlannedChange } from '../../../src/engine/plan.js';
import type { ProvisioningChange } from '../../../src/client/index.js';

/** The expected platform plan: its pending changes adjusted by what the config changes. */
const platform = (action: 'create' | 'update' | 'delete', name: string): ProvisioningChange => ({
  action,
  name,
  resource_id: `inf_${name}`,
  resource_type: 'bucket',
  changed_fields: ['region'],
  before: null,
  after: null,
});
const change = (action: PlannedChange['action'], name: string, patchFields: string[] = []): PlannedChange =>
  ({
    action,
    name,
    kind: 'infrastructure_resource',
    yamlKind: 'InfrastructureResource',
    project: 'p',
    key: name,
    reasons: [],
    notes: [],
    patchFields,
    changes: patchFields.map((field) => ({ field, before: 1, after: 2 })),
    ownership: 'owned',
  }) as PlannedChange;
const actions = (e: ExpectedProvisioning[]) => e.map((x) => `${x.action} ${x.name} ${x.origin}`);

describe('expectedChanges', () => {
  it.each([
    ['a create provisions it', [], [change('create', 'a')], ['create a config']],
    ['an update of a provisioned resource changes it', [], [change('update', 'a', ['config'])], ['update a config']],
    [
      'an update of one never provisioned stays a create',
      [platform('create', 'a')],
      [change('update', 'a', ['config'])],
      ['create a platform'],
    ],
    ['a delete of a provisioned resource destroys it', [], [change('delete', 'a')], ['delete a config']],
    ['a delete of one never provisioned drops its pending create', [platform('create', 'a')], [change('delete', 'a')], []],
    ['a replace destroys and provisions again', [], [change('replace', 'a', ['region'])], ['create a config', 'delete a config']],
    [
      'a replace of one never provisioned only provisions',
      [platform('create', 'a')],
      [change('replace', 'a', ['region'])],
      ['create a config'],
    ],
    ['pending platform changes stay; no-ops add nothing', [platform('update', 'b')], [change('no-op', 'a')], ['update b platform']],
  ])('%s', (_, current, changes, expected) => {
    expect(actions(expectedChanges(current as ProvisioningChange[], changes as PlannedChange[]))).toEqual(expected);
  });
});

describe('unexpectedChange', () => {
  const expected = expectedChanges([], [change('create', 'a'), change('update', 'b', ['config'])]);
  it('accepts the expected plan, or less of it', () => {
    expect(unexpectedChange(expected, { changes: [platform('create', 'a'), platform('update', 'b')] })).toBeNull();
    expect(unexpectedChange(expected, { changes: [platform('create', 'a')] })).toBeNull();
  });
  it('refuses a plan with a change the preview did not show, naming it', () => {
    expect(unexpectedChange(expected, { changes: [platform('create', 'a'), platform('delete', 'c')] })).toMatch(
      /^the platform's infrastructure plan has changes this apply did not show: delete c \(someone changed the project meanwhile\); nothing provisioned/,
    );
    expect(unexpectedChange(expected, { changes: [platform('delete', 'a')] })).toMatch(/did not show: delete a/);
  });
});
