import { describe, expect, it } from 'vitest';
import { Diagnostics, namedPath } from '../../src/provider/diagnostics.js';
import { ProviderContext } from '../../src/provider/rpc/context.js';
import { planResourceChange } from '../../src/provider/rpc/plan-resource-change.js';
import { validateDataResourceConfig } from '../../src/provider/rpc/validate-data-resource-config.js';
import { validateProviderConfig } from '../../src/provider/rpc/validate-provider-config.js';
import { validateResourceConfig } from '../../src/provider/rpc/validate-resource-config.js';
import { encodeDynamic, type TfObject } from '../../src/provider/values.js';

/** The Diagnostics collector, and RPC handlers (provider/rpc/*) called directly, without gRPC. */

describe('Diagnostics', () => {
  it('collects errors and warnings in order, an attribute path only when given', () => {
    const d = new Diagnostics()
      .addError('bad', 'because', namedPath(['timeouts', 'create']))
      .addWarning('degraded')
      .addError('no place', '', undefined);
    expect(d.toProto()).toEqual([
      {
        severity: 1,
        summary: 'bad',
        detail: 'because',
        attribute: { steps: [{ attribute_name: 'timeouts' }, { attribute_name: 'create' }] },
      },
      { severity: 2, summary: 'degraded', detail: '' },
      { severity: 1, summary: 'no place', detail: '' },
    ]);
    expect(Object.keys(d.toProto()[1])).toEqual(['severity', 'summary', 'detail']);
    expect(d.hasErrors).toBe(true);
    expect(new Diagnostics().addWarning('w').hasErrors).toBe(false);
  });

  it('toProto is a copy: adding later does not change an answer already made', () => {
    const d = new Diagnostics();
    const answer = d.toProto();
    d.addError('later');
    expect(answer).toEqual([]);
  });
});

describe('RPC handlers', () => {
  const ctx = new ProviderContext(() => undefined);
  const typeName = [...ctx.specs.keys()].find((t) => t.endsWith('_notification_channel'))!;
  const spec = ctx.specs.get(typeName)!;
  /** A config as Terraform sends it: every attribute, null when not set. */
  const configOf = (set: TfObject): TfObject => ({ ...Object.fromEntries(spec.attrs.map((a) => [a.name, null])), ...set });

  it('ValidateProviderConfig: one error per conflicting attribute, at that attribute', () => {
    const res = validateProviderConfig({ config: encodeDynamic({ api_key: 'dpk_1', email: 'a@example.com', password: null }) });
    expect(res.diagnostics).toEqual([
      expect.objectContaining({
        severity: 1,
        summary: 'give either api_key or email and password, not both',
        attribute: namedPath(['email']),
      }),
    ]);
  });

  it('ValidateResourceConfig: settings errors at their block attribute; schema errors name the field', () => {
    const res = validateResourceConfig(ctx, {
      type_name: typeName,
      config: encodeDynamic(configOf({ project_id: 'prj_1', name: 'a', type: 'email', timeouts: { create: 'soon' } })),
      client_capabilities: { write_only_attributes_allowed: true },
    });
    expect(res.diagnostics).toContainEqual(
      expect.objectContaining({
        severity: 1,
        summary: expect.stringMatching(/timeouts\.create "soon" is not a duration/),
        attribute: namedPath(['timeouts', 'create']),
      }),
    );
  });

  it('unknown type names are errors (thrown, the unary wrapper turns them into diagnostics)', () => {
    expect(() => validateResourceConfig(ctx, { type_name: 'dataplatform_nothing' })).toThrow('unknown resource type dataplatform_nothing');
    expect(() => validateDataResourceConfig(ctx, { type_name: 'dataplatform_nothing' })).toThrow(
      'unknown data source dataplatform_nothing',
    );
  });

  it('PlanResourceChange: a create plans the proposed state, no replacement, and passes the private data on', () => {
    const proposed = configOf({ project_id: 'prj_1', name: 'a', type: 'email' });
    const res = planResourceChange(ctx, {
      type_name: typeName,
      proposed_new_state: encodeDynamic(proposed),
      config: encodeDynamic(proposed),
      prior_private: 'p',
    });
    expect(res.requires_replace).toEqual([]);
    expect(res.planned_private).toBe('p');
    expect(res.diagnostics).toEqual([]);
  });
});
