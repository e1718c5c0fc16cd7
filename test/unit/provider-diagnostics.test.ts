import { describe, expect, it } from 'vitest';
import { AmbiguousCreateError, AmbiguousRequestError, ApiError, ClientConfigError, NetworkError } from '../../src/client/index.js';
import { UNTRUSTED_CERTIFICATE_HINT } from '../../src/client/transport.js';
import { diagnose, diagnoseAll, hint } from '../../src/provider/diagnostics.js';
import { ProviderError, ResourceHandler } from '../../src/provider/resource.js';
import { failuresOf, stoppedWaiting } from '../../src/provider/provisioning.js';
import type { ProvisioningRun } from '../../src/client/index.js';
import { resourceSpecs } from '../../src/provider/schema.js';
import { UNKNOWN } from '../../src/provider/values.js';

/** The hints the provider adds to the client's errors: what failed is in the summary, what to do in the detail. */
const info = (method: string, route: string) => ({
  method,
  route,
  url: `https://acme.localhost:8443/api/v1${route.replace('{id}', 'prj_1').replace('{resourceId}', 'chn_1')}`,
});
const apiError = (
  status: number,
  method = 'GET',
  route = '/projects/{id}/notification-channels/{resourceId}',
  extra: Partial<ConstructorParameters<typeof ApiError>[0]> = {},
) =>
  new ApiError({
    ...info(method, route),
    status,
    code: status === 429 ? 'rate_limited' : status >= 500 ? 'internal_error' : 'x',
    serverMessage: `server says ${status}`,
    requestId: 'req-1',
    ...extra,
  });

describe('diagnostics for API errors say what to do', () => {
  it('429 given up on: try later or lower -parallelism', () => {
    const d = diagnose(apiError(429, 'GET', '/projects/{id}/notification-channels/{resourceId}', { retryAfterMs: 3_600_000 }));
    expect(d.summary).toBe('server says 429');
    expect(d.detail).toContain('(HTTP 429 rate_limited on GET /projects/{id}/notification-channels/{resourceId}, request id req-1)');
    expect(d.detail).toContain('Rate limited');
    expect(d.detail).toContain('Try again later, or lower -parallelism');
  });

  it('5xx after the retries: run apply again, the request was safe to repeat', () => {
    const d = diagnose(apiError(503, 'GET', '/projects/{id}/notification-channels/{resourceId}', { attempt: 5 }));
    expect(d.summary).toBe('server says 503');
    expect(d.detail).toContain('HTTP 503 internal_error on GET');
    expect(d.detail).toContain('The service failed after 5 attempts. Run terraform apply again');
    expect(d.detail).toContain('(GET) is safe to repeat');
    expect(diagnose(apiError(500, 'DELETE')).detail).toContain('The service failed. Run terraform apply again');
  });

  it('401 and 403: check the credentials, or their permission level', () => {
    expect(diagnose(apiError(401)).detail).toMatch(
      /did not accept the credentials: check the provider block's api_key \(DATAPLATFORM_API_KEY\), or email and password/,
    );
    expect(diagnose(apiError(403, 'POST', '/projects/{id}/notification-channels')).detail).toMatch(/lack permission.*read-write/);
  });

  it('409 on a create whose name is taken: import the existing object or rename; a full project or tenant: no such hint', () => {
    const taken = { serverMessage: 'A notification channel with name "oncall" already exists in this project' };
    expect(diagnose(apiError(409, 'POST', '/projects/{id}/notification-channels', taken)).detail).toContain(
      'terraform import <resource address> <project_id>/<name>',
    );
    // With the planned resource known (ApplyResourceChange of a create), the import named in full.
    expect(
      diagnose(apiError(409, 'POST', '/projects/{id}/notification-channels', taken), {
        typeName: 'dataplatform_notification_channel',
        id: 'prj_1/oncall',
      }).detail,
    ).toContain(
      'terraform import dataplatform_notification_channel.<label> prj_1/oncall (the address after "with" above), or an import block with id = "prj_1/oncall"',
    );
    const full = { serverMessage: 'This write would take the tenant past its storage limit: 2.0 MiB of 2.0 MiB used' };
    expect(hint(apiError(409, 'POST', '/projects/{id}/notification-channels', full))).toBeUndefined();
    expect(hint(apiError(409, 'DELETE'))).toBeUndefined();
  });

  it("the import id of a planned create comes from the descriptor's identity and scope; unknown parts give none", () => {
    const handler = (typeName: string) =>
      new ResourceHandler(resourceSpecs().get(typeName)!, () => {
        throw new Error('no API in this test');
      });
    const channels = handler('dataplatform_notification_channel');
    expect(channels.importId({ project_id: 'prj_1', name: 'oncall' })).toBe('prj_1/oncall');
    expect(channels.importId({ project_id: UNKNOWN, name: 'oncall' })).toBeUndefined();
    expect(channels.importId({ project_id: 'prj_1', name: UNKNOWN })).toBeUndefined();
    expect(channels.importId(null)).toBeUndefined();
    expect(handler('dataplatform_project').importId({ name: 'analytics' })).toBe('analytics');
  });

  it('a delete refused because the resource is in use: replace_triggered_by, as for a replace; a missing project: ids, not names', () => {
    const inUse = {
      serverMessage: 'Connector "orders-db" is used by alert rule "dangling" (target.connector_id); change or delete that first',
    };
    expect(hint(apiError(409, 'DELETE', '/projects/{id}/connectors/{resourceId}', inUse))).toContain(
      'add lifecycle { replace_triggered_by = [<this resource>.id] } to that resource',
    );
    const missing = { serverMessage: 'Project not found', url: 'https://acme.localhost:8443/api/v1/projects/analytics/connectors' };
    expect(hint(apiError(404, 'POST', '/projects/{id}/connectors', missing))).toBe(
      "No project has the id in project_id (analytics): it takes a project's id (prj_...), such as dataplatform_project.<label>.id, not its name; the project may have been deleted (terraform plan then plans it again).",
    );
    // At the project_id attribute, so that Terraform shows that line.
    const attrs = resourceSpecs().get('dataplatform_connector')!.attrs;
    expect(diagnoseAll(apiError(404, 'POST', '/projects/{id}/connectors', missing), attrs)[0].attribute).toEqual({
      steps: [{ attribute_name: 'project_id' }],
    });
    // Another 404 (the resource itself) has neither.
    expect(hint(apiError(404, 'GET', '/projects/{id}/connectors/{resourceId}', { serverMessage: 'Connector not found' }))).toBeUndefined();
  });

  it('a create that may have happened: names it, says nothing is duplicated and how to import it', () => {
    const cause = apiError(503, 'POST', '/projects/{id}/notification-channels');
    const err = new AmbiguousCreateError({
      ...info('POST', '/projects/{id}/notification-channels'),
      cause,
      create: { kind: 'notification_channel', scope: 'project', projectId: 'prj_1', identity: { field: 'name', value: 'oncall' } },
    });
    const d = diagnose(err);
    expect(d.summary).toMatch(
      /^Creating notification_channel name="oncall" in project prj_1 may or may not have been applied: server says 503/,
    );
    expect(d.detail).toContain(
      'Terraform did not record this notification_channel, and the provider could not find out whether it was created (looking it up by name failed too). Run terraform apply again',
    );
    expect(d.detail).toContain('refuses a second notification_channel with the same name (409 conflict), so nothing is duplicated');
    expect(d.detail).toContain('terraform import <resource address> prj_1/oncall');
    expect(diagnose(err, { typeName: 'dataplatform_notification_channel', id: 'prj_1/oncall' }).detail).toContain(
      'then import it with terraform import dataplatform_notification_channel.<label> prj_1/oncall (the address after "with" above).',
    );
    const tenant = new AmbiguousCreateError({
      ...info('POST', '/projects'),
      cause,
      create: { kind: 'project', scope: 'tenant', identity: { field: 'name', value: 'analytics' } },
    });
    expect(diagnose(tenant).detail).toContain('terraform import <resource address> analytics.');
  });

  it('an API key that may have been created: not to be imported (its value is shown only at creation), deleted and created again', () => {
    const err = new AmbiguousCreateError({
      ...info('POST', '/projects/{id}/api-keys'),
      cause: apiError(503, 'POST', '/projects/{id}/api-keys'),
      create: { kind: 'api_key', scope: 'project', projectId: 'prj_1', identity: { field: 'name', value: 'ci' } },
    });
    const detail = diagnose(err).detail;
    expect(detail).toContain('Terraform did not record this api_key, and its key is shown only when it is created');
    expect(detail).toContain('Check whether api_key "ci" exists; if it does, delete it through the API, then run terraform apply again.');
    expect(detail).not.toContain('terraform import');
  });

  it('an update that may have happened: plan again, the provider reads it back', () => {
    const err = new AmbiguousRequestError({
      ...info('PATCH', '/projects/{id}/notification-channels/{resourceId}'),
      cause: apiError(502, 'PATCH'),
    });
    expect(diagnose(err).detail).toMatch(/^Run terraform plan or apply again: Terraform reads the resource back/);
  });

  it('no answer at all: check endpoint and CA', () => {
    const err = new NetworkError({ ...info('GET', '/projects'), code: 'ECONNREFUSED', reason: 'connection refused' });
    expect(diagnose(err)).toMatchObject({
      summary: expect.stringContaining('connection refused'),
      detail: expect.stringContaining('endpoint (DATAPLATFORM_URL)'),
    });
    // The client's own hint for an untrusted certificate is not repeated.
    const untrusted = new NetworkError({
      ...info('GET', '/projects'),
      code: 'SELF_SIGNED_CERT_IN_CHAIN',
      reason: `self-signed certificate in certificate chain (${UNTRUSTED_CERTIFICATE_HINT})`,
    });
    expect(diagnose(untrusted)).toEqual({ severity: 1, summary: expect.stringContaining("the provider's ca_file"), detail: '' });
  });

  it('adds nothing where the message says it all', () => {
    expect(diagnose(apiError(404)).detail).toBe(
      'server says 404 (HTTP 404 x on GET /projects/{id}/notification-channels/{resourceId}, request id req-1)',
    );
    expect(diagnose(new ClientConfigError('bad config'))).toEqual({ severity: 1, summary: 'bad config', detail: '' });
    expect(diagnose(new ProviderError('not_found', 'summary', 'detail'))).toEqual({ severity: 1, summary: 'summary', detail: 'detail' });
    // Field errors point at attributes and keep their own detail.
    const fields = apiError(400, 'POST', '/projects/{id}/notification-channels', { details: [{ field: 'name', message: 'is required' }] });
    expect(diagnoseAll(fields, [{ name: 'name', shape: 'primitive', json: {} } as any])[0]).toMatchObject({
      summary: 'name is required',
      attribute: { steps: [{ attribute_name: 'name' }] },
    });
  });
});

describe('stopped while waiting for provisioning (Ctrl-C)', () => {
  const infra = new ResourceHandler(resourceSpecs().get('dataplatform_infrastructure_resource')!, () => {
    throw new Error('no client in this test');
  });

  it('says the platform goes on only when an apply had started for the change, and how to keep a tainted create', () => {
    const running = stoppedWaiting(infra, 'create', 'run_1');
    expect(running.summary).toBe('dataplatform_infrastructure_resource: stopped while waiting for provisioning');
    expect(running.detail).toContain('The platform goes on with its infrastructure apply (run run_1)');
    expect(running.detail).toContain('run terraform untaint <address> first to keep it');
    // No apply had started (waiting behind another's 409): it stays pending, nothing "goes on".
    const pending = stoppedWaiting(infra, 'update', undefined);
    expect(pending.detail).toContain('No platform apply had started for this change: it stays pending on the platform');
    expect(pending.detail).not.toContain('goes on');
    expect(pending.detail).not.toContain('untaint');
  });
});

describe('provisioning failed', () => {
  const infra = new ResourceHandler(resourceSpecs().get('dataplatform_infrastructure_resource')!, () => {
    throw new Error('no client in this test');
  });
  const run = (error: string) =>
    ({
      id: 'run_9',
      status: 'failed',
      error,
      changes: [{ resource_id: 'inf_1', name: 'lake', action: 'create', status: 'failed', error }],
    }) as unknown as ProvisioningRun;

  it('tells to fix the configuration for a refusal, and not for a run a service restart cut short', () => {
    const [refused] = failuresOf(infra, { id: 'inf_1' }, 'create', run('aws has no region "mars-1"'));
    expect(refused.detail).toContain('fix the configuration (a region the provider knows, for example)');
    const [interrupted] = failuresOf(infra, { id: 'inf_1' }, 'create', run('interrupted by service restart'));
    expect(interrupted.summary).toBe('dataplatform_infrastructure_resource: provisioning failed: interrupted by service restart');
    expect(interrupted.detail).toContain('The platform restarted during its apply: nothing is wrong with the configuration');
    expect(interrupted.detail).not.toContain('fix the configuration');
  });
});
