import { describe, expect, it } from 'vitest';
import { kind } from '../../../src/kinds/index.js';
import { ProviderError, ResourceHandler } from '../../../src/provider/resource.js';
import {
  dataSourceSpecs,
  objectToApi,
  objectToTf,
  resourceSpec,
  resourceSpecs,
  schemaMessage,
  type AttrSpec,
} from '../../../src/provider/schema.js';
import { attributePath } from '../../../src/provider/diagnostics.js';
import { providerImplementation } from '../../../src/provider/provider.js';
import { loadDefinitions } from '../../../src/provider/proto.js';
import { UNKNOWN, decodeDynamic, encodeDynamic, type TfObject } from '../../../src/provider/values.js';
import type { DataPlatformClient } from '../../../src/client/index.js';

const connectorSpec = resourceSpec(kind('connector'));
const attr = (name: string) => connectorSpec.attrs.find((a) => a.name === name)!;

/** A client whose connector API answers with `answer(body)`. */
function fakeClient(answer: (body: Record<string, unknown>) => Record<string, unknown>): () => DataPlatformClient {
  const api = {
    create: async (body: Record<string, unknown>) => answer(body),
    update: async (_id: string, body: Record<string, unknown>) => answer(body),
    get: async () => answer({}),
    delete: async () => undefined,
  };
  return () => ({ resourcesOf: () => api }) as unknown as DataPlatformClient;
}

const config = (extra: TfObject = {}): TfObject => {
  const out: TfObject = {};
  for (const a of connectorSpec.attrs) out[a.name] = null;
  return { ...out, project_id: 'prj_1', name: 'orders', connector_type: 'postgresql', ...extra };
};

describe('schema mapping', () => {
  it('covers every writable kind generically', () => {
    expect([...resourceSpecs().keys()].sort()).toContain('dataplatform_connector');
    for (const spec of resourceSpecs().values()) {
      const msg = schemaMessage(spec) as { block: { attributes: { name: string }[] } };
      expect(msg.block.attributes.map((a) => a.name)).toContain('id');
      if (spec.descriptor.scope === 'project')
        expect(spec.attrs.find((a) => a.name === 'project_id')).toMatchObject({ required: true, replace: true });
    }
  });

  it('maps connector fields by the rules', () => {
    expect(attr('name')).toMatchObject({ required: true, computed: false, shape: 'primitive', elem: 'string' });
    expect(attr('connector_type')).toMatchObject({ required: true, replace: true });
    expect(attr('config')).toMatchObject({ optional: true, computed: true, shape: 'object', default: {} });
    expect(attr('config').attrs!.find((a) => a.name === 'port')).toMatchObject({ elem: 'number', optional: true });
    expect(attr('config').attrs!.find((a) => a.name === 'extra')).toMatchObject({ shape: 'map', elem: 'string' });
    expect(attr('credentials').attrs!.find((a) => a.name === 'password')).toMatchObject({ sensitive: true });
    expect(attr('selected_tables')).toMatchObject({ shape: 'list', elem: 'string', optional: true, computed: true });
    expect(attr('labels')).toMatchObject({ shape: 'map', optional: true, computed: true });
    expect(attr('status')).toMatchObject({ computed: true, optional: false, required: false });
    const steps = resourceSpec(kind('pipeline')).attrs.find((a) => a.name === 'steps');
    expect(steps?.shape).toBe('objects');
  });

  it('round-trips unknowns through msgpack', () => {
    const v: TfObject = { a: UNKNOWN, b: [1, 'x', null], c: { d: true } };
    expect(decodeDynamic(encodeDynamic(v))).toEqual(v);
  });
});

describe('plan and apply rules', () => {
  const h = new ResourceHandler(
    connectorSpec,
    fakeClient(() => ({})),
  );

  it('plans computed fields unknown and defaults on create', () => {
    const c = config({ schedule: '0  2 * * *' });
    const { planned } = h.plan(null, c, c);
    expect(planned!.id).toBe(UNKNOWN);
    expect(planned!.status).toBe(UNKNOWN);
    expect(planned!.labels).toEqual({});
    expect(planned!.selected_tables).toEqual([]);
    expect(planned!.schedule).toBe('0  2 * * *');
  });

  it('keeps the prior spelling when only normalisation differs, and replaces on immutable change', () => {
    const prior = {
      ...config({ schedule: '0  2 * * *', labels: {}, selected_tables: [], config: null, credentials: null }),
      id: 'con_1',
      status: 'created',
      created_at: 'x',
      updated_at: 'y',
      last_sync_at: null,
    };
    const same = config({ schedule: '0 2   * * *' });
    expect(h.plan(prior, { ...prior, ...same }, same).planned!.schedule).toBe('0  2 * * *');
    const changed = config({ schedule: '0  2 * * *', connector_type: 'mysql' });
    const res = h.plan(prior, { ...prior, ...changed }, changed);
    expect(res.replace).toEqual([['connector_type']]);
  });

  it('replaces when the project changes to another known project', () => {
    const prior = {
      ...config({ schedule: '0  2 * * *', labels: {}, selected_tables: [], config: null, credentials: null }),
      id: 'con_1',
      status: 'created',
      created_at: 'x',
      updated_at: 'y',
      last_sync_at: null,
    };
    const moved = config({ schedule: '0  2 * * *', project_id: 'prj_2' });
    const res = h.plan(prior, { ...prior, ...moved }, moved);
    expect(res.replace).toEqual([['project_id']]);
    expect(res.planned!.project_id).toBe('prj_2');
  });

  it('keeps the user spelling after apply when the API normalises', async () => {
    const ok = new ResourceHandler(
      connectorSpec,
      fakeClient((body) => ({
        ...body,
        schedule: '0 2 * * *',
        id: 'con_1',
        project_id: 'prj_1',
        status: 'created',
        created_at: 't',
        updated_at: 't',
        last_sync_at: null,
      })),
    );
    const c = config({ schedule: '0  2 * * *', credentials: { username: 'u', password: 'p' } });
    const state = await ok.apply(null, ok.plan(null, c, c).planned);
    expect(state).toMatchObject({ schedule: '0  2 * * *', id: 'con_1', credentials: { username: 'u', password: 'p' } });
  });

  it('fails (instead of Terraform) when the API answer contradicts the plan', async () => {
    const bad = new ResourceHandler(
      connectorSpec,
      fakeClient((body) => ({
        ...body,
        name: 'something-else',
        id: 'con_1',
        project_id: 'prj_1',
        status: 'created',
        created_at: 't',
        updated_at: 't',
      })),
    );
    const c = config();
    await expect(bad.apply(null, bad.plan(null, c, c).planned)).rejects.toThrow(ProviderError);
    await expect(bad.apply(null, bad.plan(null, c, c).planned)).rejects.toThrow(/does not match the plan/);
  });
});

describe('write-only secrets', () => {
  it('adds <secret>_wo and <secret>_wo_version next to each secret', () => {
    const creds = attr('credentials').attrs!;
    expect(creds.map((a) => a.name)).toEqual(['username', 'password', 'password_wo', 'password_wo_version']);
    expect(creds.find((a) => a.name === 'password_wo')).toMatchObject({ writeOnly: true, sensitive: true, optional: true });
    const user = resourceSpec(kind('user')).attrs.map((a) => a.name);
    expect(user).toEqual(expect.arrayContaining(['password', 'password_wo', 'password_wo_version']));
  });

  it('plans write-only values as null and sends them from the config', async () => {
    const sent: Record<string, unknown>[] = [];
    let stored: Record<string, unknown> = {
      id: 'con_1',
      project_id: 'prj_1',
      status: 'created',
      created_at: 't',
      updated_at: 't',
      last_sync_at: null,
    };
    const h = new ResourceHandler(
      connectorSpec,
      fakeClient((body) => {
        sent.push(structuredClone(body));
        stored = { ...stored, ...body, updated_at: `t${sent.length}` };
        const { credentials, ...rest } = stored as { credentials?: Record<string, unknown> };
        return { ...rest, credentials: { username: credentials?.username } };
      }),
    );
    const c = config({ credentials: { username: 'u', password: null, password_wo: 'hidden', password_wo_version: 1 } });
    const { planned } = h.plan(null, c, c);
    expect((planned!.credentials as TfObject).password_wo).toBeNull();
    const state = await h.apply(null, planned, c);
    expect(sent[0].credentials).toEqual({ username: 'u', password: 'hidden' });
    expect(state!.credentials).toEqual({ username: 'u', password: null, password_wo: null, password_wo_version: 1 });
    // Same version: no change. New version: an update that sends the secret again.
    expect(h.plan(state, state, c).planned!.updated_at).toBe('t1');
    const c2 = config({ credentials: { username: 'u', password: null, password_wo: 'rotated', password_wo_version: 2 } });
    const next = h.plan(state, { ...state!, credentials: c2.credentials }, c2).planned!;
    expect(next.updated_at).toBe(UNKNOWN);
    await h.apply(state, next, c2);
    expect(sent[1]).toEqual({ credentials: { username: 'u', password: 'rotated' } });
  });
});

describe("ValidateResourceConfig and the client's write-only capability", () => {
  const impl = providerImplementation(() => undefined);
  const validate = (request: unknown) =>
    new Promise<{ diagnostics: any[] }>((resolve, reject) =>
      impl.ValidateResourceConfig({ request } as any, (err: unknown, res: any) => (err ? reject(err) : resolve(res))),
    );
  const woConnector = config({ credentials: { username: 'u', password: null, password_wo: 'hidden', password_wo_version: 1 } });
  const userSpec = resourceSpec(kind('user'));
  const woUser: TfObject = {
    ...Object.fromEntries(userSpec.attrs.map((a) => [a.name, null])),
    email: 'a@example.com',
    role: 'read-only',
    password_wo: UNKNOWN,
    password_wo_version: 1,
  };

  it('refuses a *_wo attribute, at its attribute, when Terraform does not allow write-only attributes', async () => {
    for (const client_capabilities of [undefined, null, {}, { write_only_attributes_allowed: false, deferral_allowed: true }]) {
      const res = await validate({ type_name: 'dataplatform_connector', config: encodeDynamic(woConnector), client_capabilities });
      expect(res.diagnostics, JSON.stringify(client_capabilities)).toEqual([
        {
          severity: 1,
          summary: 'dataplatform_connector: credentials.password_wo is write-only, which needs Terraform 1.11 or later',
          detail: expect.stringContaining(
            'Upgrade to Terraform 1.11 or later, or set credentials.password instead of credentials.password_wo and credentials.password_wo_version.',
          ),
          // Terraform places paths only down to the first nested attribute (see attributePath).
          attribute: { steps: [{ attribute_name: 'credentials' }] },
        },
      ]);
    }
    // A top-level one (unknown until apply, as from an ephemeral variable, still counts).
    const user = await validate({ type_name: 'dataplatform_user', config: encodeDynamic(woUser) });
    expect(user.diagnostics).toEqual([
      expect.objectContaining({
        summary: 'dataplatform_user: password_wo is write-only, which needs Terraform 1.11 or later',
        attribute: { steps: [{ attribute_name: 'password_wo' }] },
      }),
    ]);
  });

  it('accepts it when Terraform allows write-only attributes, and anything else without the capability', async () => {
    const allowed = { write_only_attributes_allowed: true };
    expect(
      (await validate({ type_name: 'dataplatform_connector', config: encodeDynamic(woConnector), client_capabilities: allowed }))
        .diagnostics,
    ).toEqual([]);
    expect(
      (await validate({ type_name: 'dataplatform_user', config: encodeDynamic(woUser), client_capabilities: allowed })).diagnostics,
    ).toEqual([]);
    const plain = config({ credentials: { username: 'u', password: 'p', password_wo: null, password_wo_version: null } });
    expect((await validate({ type_name: 'dataplatform_connector', config: encodeDynamic(plain) })).diagnostics).toEqual([]);
  });

  it('refuses a secret given both ways, at its attribute', async () => {
    const both = config({ credentials: { username: 'u', password: 'p', password_wo: 'hidden', password_wo_version: 1 } });
    const res = await validate({
      type_name: 'dataplatform_connector',
      config: encodeDynamic(both),
      client_capabilities: { write_only_attributes_allowed: true },
    });
    expect(res.diagnostics).toEqual([
      expect.objectContaining({
        severity: 1,
        summary: 'dataplatform_connector: give either credentials.password or credentials.password_wo, not both',
        attribute: { steps: [{ attribute_name: 'credentials' }] },
      }),
    ]);
  });

  it('reads the capability from the wire at field 3 of the request (tfplugin6 ValidateResourceConfig.Request)', async () => {
    const defs = loadDefinitions() as any;
    const decode = (buf: Buffer) => defs['tfplugin6.Provider'].ValidateResourceConfig.requestDeserialize(buf);
    const varint = (n: number) => {
      const out: number[] = [];
      while (n > 127) {
        out.push((n & 127) | 128);
        n >>>= 7;
      }
      out.push(n);
      return out;
    };
    const field = (no: number, bytes: Uint8Array | number[]) => Buffer.from([(no << 3) | 2, ...varint(bytes.length), ...bytes]);
    const msgpack = encodeDynamic(woConnector).msgpack!;
    const head = Buffer.concat([field(1, [...Buffer.from('dataplatform_connector')]), field(2, [...field(1, [...msgpack])])]);
    // ClientCapabilities { deferral_allowed = 1; write_only_attributes_allowed = 2; } as varints.
    const withCapability = decode(Buffer.concat([head, field(3, [0x10, 0x01])]));
    expect(withCapability.client_capabilities).toMatchObject({ write_only_attributes_allowed: true });
    expect((await validate(withCapability)).diagnostics).toEqual([]);
    const without = decode(head);
    expect(without.client_capabilities?.write_only_attributes_allowed ?? false).toBe(false);
    expect((await validate(without)).diagnostics).toHaveLength(1);
  });
});

describe('config validation', () => {
  it('checks known values against the create schema, skipping unknown ones', async () => {
    const { validateConfig } = await import('../../../src/provider/validate.js');
    expect(validateConfig(connectorSpec, config({ schedule: '0  2 * * *' }))).toEqual([]);
    expect(validateConfig(connectorSpec, config({ connector_type: 'oracle' })).map((e) => e.field)).toEqual(['connector_type']);
    expect(validateConfig(connectorSpec, config({ schedule: 'every day' })).map((e) => e.field)).toEqual(['schedule']);
    const rule = resourceSpec(kind('alert_rule'));
    const ruleConfig: TfObject = Object.fromEntries(rule.attrs.map((a) => [a.name, null]));
    Object.assign(ruleConfig, {
      project_id: UNKNOWN,
      name: 'r',
      severity: 'warning',
      condition: { metric: 'run_failed', operator: 'gt', threshold: 0, window_minutes: null },
      channel_ids: [UNKNOWN],
    });
    expect(validateConfig(rule, ruleConfig)).toEqual([]);
  });
});

describe('every kind', () => {
  it('plans a create from a minimal config without errors', () => {
    for (const spec of resourceSpecs().values()) {
      const c: TfObject = Object.fromEntries(
        spec.attrs.map((a) => [
          a.name,
          a.required && a.shape === 'primitive' ? (a.elem === 'number' ? 1 : a.elem === 'bool' ? true : 'x') : null,
        ]),
      );
      const { planned } = new ResourceHandler(
        spec,
        fakeClient(() => ({})),
      ).plan(null, c, c);
      expect(planned!.id, spec.typeName).toBe(UNKNOWN);
    }
  });

  it('replaces kinds the API cannot update on any change', () => {
    const apiKey = resourceSpec(kind('api_key'));
    expect(apiKey.attrs.find((a) => a.name === 'permission_level')?.replace).toBe(true);
    expect(apiKey.attrs.find((a) => a.name === 'key')).toMatchObject({ computed: true, sensitive: true, replace: false });
  });
});

describe('data source specs', () => {
  it('derives a lookup for every listable resource kind: its identity as input, the rest computed, no secrets', () => {
    const data = dataSourceSpecs();
    for (const spec of resourceSpecs().values()) {
      if (!spec.descriptor.operations.includes('list')) continue;
      const lookup = data.get(spec.typeName);
      expect(lookup, `${spec.typeName} has no lookup data source`).toBeDefined();
      const d = spec.descriptor;
      expect(lookup!.inputs).toEqual(d.scope === 'project' ? ['project_id', d.identity] : [d.identity]);
      const walk = (attrs: AttrSpec[], top: boolean) => {
        for (const a of attrs) {
          expect(a.json['x-secret'], `${spec.typeName}.${a.name} is a secret`).toBeFalsy();
          expect(a.synthetic).toBeUndefined();
          if (top && lookup!.inputs.includes(a.name)) expect(a).toMatchObject({ required: true, computed: false });
          else expect(a).toMatchObject({ required: false, optional: false, computed: true });
          if (a.attrs) walk(a.attrs, false);
        }
      };
      walk(lookup!.attrs, true);
    }
    const password = data
      .get('dataplatform_connector')!
      .attrs.find((a) => a.name === 'credentials')!
      .attrs!.map((a) => a.name);
    expect(password).toEqual(['username']);
  });

  it('derives the views from their read-only kinds', () => {
    const run = dataSourceSpecs().get('dataplatform_latest_run')!;
    expect(run.attrs.filter((a) => !a.computed).map((a) => [a.name, a.required])).toEqual([
      ['project_id', true],
      ['connector_id', false],
      ['pipeline_id', false],
      ['dbt_project_id', false],
    ]);
    expect(run.attrs.find((a) => a.name === 'tables')).toMatchObject({ shape: 'objects', computed: true });
    const schema = dataSourceSpecs().get('dataplatform_connector_schema')!;
    const columns = schema.attrs.find((a) => a.name === 'tables')!.attrs!.find((a) => a.name === 'columns')!;
    expect(columns.attrs!.map((a) => a.name)).toEqual(
      Object.keys(kind('discovered_schema').schema.properties!.tables.items!.properties!.columns.items!.properties!),
    );
  });
});

describe('API field paths as attribute paths', () => {
  const rule = resourceSpec(kind('alert_rule')).attrs;
  const pipeline = resourceSpec(kind('pipeline')).attrs;
  it('follows objects, lists of objects, lists and maps', () => {
    expect(attributePath(rule, 'target.connector_id')).toEqual({
      steps: [{ attribute_name: 'target' }, { attribute_name: 'connector_id' }],
    });
    expect(attributePath(rule, 'channel_ids[1]')).toEqual({ steps: [{ attribute_name: 'channel_ids' }, { element_key_int: 1 }] });
    expect(attributePath(rule, 'labels.team')).toEqual({ steps: [{ attribute_name: 'labels' }, { element_key_string: 'team' }] });
    expect(attributePath(pipeline, 'steps[2].depends_on[0]')).toEqual({
      steps: [{ attribute_name: 'steps' }, { element_key_int: 2 }, { attribute_name: 'depends_on' }, { element_key_int: 0 }],
    });
    expect(attributePath(pipeline, '(body)')).toBeUndefined();
  });
});

describe('fields named like a Terraform meta-argument', () => {
  it('are renamed for HCL and mapped back to the API field', () => {
    const spec = resourceSpec(kind('infrastructure_resource'));
    const a = spec.attrs.find((x) => x.apiName === 'provider');
    expect(a).toMatchObject({ name: 'provider_name', required: true, replace: true });
    expect(spec.attrs.some((x) => x.name === 'provider')).toBe(false);
    const state = objectToTf(spec.attrs, { id: 'inf_1', name: 'wh', provider: 'aws', resource_type: 'warehouse', region: 'eu' });
    expect(state).toMatchObject({ provider_name: 'aws' });
    expect(objectToApi(spec.attrs, state)).toMatchObject({ provider: 'aws', name: 'wh' });
    expect(attributePath(spec.attrs, 'provider')).toEqual({ steps: [{ attribute_name: 'provider_name' }] });
  });
});

describe('attribute paths Terraform can place in the configuration', () => {
  it('end before an attribute name below another attribute', () => {
    const rule = resourceSpec(kind('alert_rule')).attrs;
    const pipeline = resourceSpec(kind('pipeline')).attrs;
    expect(attributePath(rule, 'target.connector_id', true)).toEqual({ steps: [{ attribute_name: 'target' }] });
    expect(attributePath(rule, 'channel_ids[1]', true)).toEqual({ steps: [{ attribute_name: 'channel_ids' }, { element_key_int: 1 }] });
    expect(attributePath(pipeline, 'steps[2].depends_on[0]', true)).toEqual({
      steps: [{ attribute_name: 'steps' }, { element_key_int: 2 }],
    });
  });
});
