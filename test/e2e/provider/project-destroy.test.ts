import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { haveTerraform, PROVIDER_BLOCK, TerraformWorkspace } from './harness.js';

/**
 * Deleting a project deletes everything in it. Terraform deletes a project's own resources before
 * it, so what a destroy of the project still finds there was made outside this configuration: the
 * provider refuses to delete it without `force_destroy = true` (as AWS's S3 bucket does).
 */
describe.skipIf(testStore() === 'postgres' || !haveTerraform)(
  'destroying a project that holds what Terraform does not manage (real terraform)',
  () => {
    let svc: TestService;
    let t: TestTenant;
    let ws: TerraformWorkspace;
    const flat = (out: string) => out.replace(/\s+/g, ' ');
    const config = (forceDestroy?: boolean) =>
      PROVIDER_BLOCK +
      `\nresource "dataplatform_project" "p" {\n  name = "tf-destroy"\n${forceDestroy === undefined ? '' : `  force_destroy = ${forceDestroy}\n`}}\n` +
      `\nresource "dataplatform_notification_channel" "c" {\n  project_id = dataplatform_project.p.id\n  name       = "by-terraform"\n  type       = "email"\n  config     = { email_addresses = ["tf@example.com"] }\n}\n`;
    const project = async () => (await svc.ok(t, 'GET', '/projects')).data.find((p: any) => p.name === 'tf-destroy');

    beforeAll(async () => {
      svc = await startTestService();
      t = await svc.tenant();
      ws = await TerraformWorkspace.create(svc, t);
      ws.write('main.tf', config());
      await ws.init();
    }, 60_000);

    afterAll(async () => {
      await svc?.close();
      ws?.close();
    });

    it(
      'refuses, naming what is there; its own channel is deleted; with force_destroy applied, the destroy deletes the project and what is in it',
      { timeout: 120_000 },
      async () => {
        expect(await ws.apply()).toContain('Apply complete! Resources: 2 added, 0 changed, 0 destroyed.');
        const { id } = await project();
        await svc.ok(t, 'POST', `/projects/${id}/connectors`, { body: { name: 'by-hand', connector_type: 'postgresql' } });

        const refused = await ws.tf(['destroy', '-auto-approve', '-input=false'], [1]);
        expect(flat(refused.out)).toContain(
          'Error: dataplatform_project: project "tf-destroy" still holds resources this configuration does not manage (connectors)',
        );
        expect(flat(refused.out)).toContain('set force_destroy = true on the project and apply it, then destroy again');
        // Terraform's own channel went first; the project and the connector made by hand are still there, and in the state.
        expect((await svc.ok(t, 'GET', `/projects/${id}/notification-channels`)).data).toEqual([]);
        expect((await svc.ok(t, 'GET', `/projects/${id}/connectors`)).data.map((c: any) => c.name)).toEqual(['by-hand']);
        expect((await ws.show()).values.root_module.resources.map((r: any) => r.address)).toEqual(['dataplatform_project.p']);

        // The setting alone changes nothing on the platform: an in-place update of the state.
        ws.write('main.tf', config(true));
        const apply = await ws.apply();
        expect(apply).toContain('Resources: 1 added, 1 changed, 0 destroyed.');
        expect((await project()).id).toBe(id);
        expect(await ws.tf(['destroy', '-auto-approve', '-input=false'])).toMatchObject({
          out: expect.stringContaining('Destroy complete! Resources: 2 destroyed.'),
        });
        expect(await project()).toBeUndefined();
      },
    );

    it(
      "a project_id that is no project's (its name given, say) is an error at that line, saying it takes an id",
      { timeout: 60_000 },
      async () => {
        ws.write(
          'main.tf',
          PROVIDER_BLOCK +
            `\nresource "dataplatform_notification_channel" "c" {\n  project_id = "analytics"\n  name       = "c"\n  type       = "email"\n  config     = { email_addresses = ["c@example.com"] }\n}\n`,
        );
        const out = flat((await ws.tf(['apply', '-auto-approve', '-input=false'], [1])).out);
        expect(out).toContain('Error: Project not found with dataplatform_notification_channel.c,');
        expect(out).toMatch(/on main\.tf line \d+, in resource "dataplatform_notification_channel" "c": \d+: project_id = "analytics"/);
        expect(out).toContain("No project has the id in project_id (analytics): it takes a project's id (prj_...)");
      },
    );
  },
);
