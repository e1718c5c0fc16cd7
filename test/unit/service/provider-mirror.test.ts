import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, test } from 'vitest';
import { ApiError } from '../../../src/service/errors.js';
import { mirrorContentType, registerProviderMirror, type ProviderMirrorSource } from '../../../src/service/provider-mirror.js';

const apps: FastifyInstance[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

/** The mirror alone, behind an error handler that answers the envelope as the service does. */
async function mirror(source?: ProviderMirrorSource): Promise<FastifyInstance> {
  const app = Fastify();
  apps.push(app);
  app.setErrorHandler(async (err, _req, reply) => {
    const apiError = err instanceof ApiError ? err : new ApiError('internal_error', String(err));
    reply.code(apiError.status);
    return apiError.toJSON();
  });
  registerProviderMirror(app, source);
  await app.ready();
  return app;
}

const files = new Map([
  ['registry.terraform.io/dataplatform/dataplatform/index.json', Buffer.from('{"versions":{}}\n')],
  ['terraform-provider-dataplatform_1.0.0_linux_amd64.zip', Buffer.from('PK')],
  ['terraform-provider-dataplatform_1.0.0_SHA256SUMS', Buffer.from('abc  x.zip\n')],
  ['terraform-provider-dataplatform_1.0.0_manifest.json', Buffer.from('{}')],
]);

describe('the provider network mirror', () => {
  test('serves each file of the source with its type, cached by clients for 5 minutes', async () => {
    const app = await mirror({ files: async () => files });
    const index = await app.inject({ url: '/terraform/providers/registry.terraform.io/dataplatform/dataplatform/index.json' });
    expect([index.statusCode, index.headers['content-type'], index.headers['cache-control'], index.body]).toEqual([
      200,
      'application/json',
      'public, max-age=300',
      '{"versions":{}}\n',
    ]);
    const zip = await app.inject({ url: '/terraform/providers/terraform-provider-dataplatform_1.0.0_linux_amd64.zip' });
    expect([zip.statusCode, zip.headers['content-type'], zip.rawPayload]).toEqual([200, 'application/zip', Buffer.from('PK')]);
  });

  test('content types by name', () => {
    expect(mirrorContentType('a/index.json')).toBe('application/json');
    expect(mirrorContentType('x_1.0.0_linux_amd64.zip')).toBe('application/zip');
    expect(mirrorContentType('x_1.0.0_SHA256SUMS')).toBe('text/plain; charset=utf-8');
    expect(mirrorContentType('x_1.0.0_SHA256SUMS.sig')).toBe('application/octet-stream');
  });

  test('a file not in the release is a 404 naming it', async () => {
    const app = await mirror({ files: async () => files });
    const res = await app.inject({ url: '/terraform/providers/nope.zip' });
    expect([res.statusCode, res.json()]).toEqual([
      404,
      { error: { code: 'resource_not_found', message: 'No file /terraform/providers/nope.zip in the provider release' } },
    ]);
  });

  test('the release is loaded once, on the first request, and a failed load is tried again', async () => {
    let loads = 0;
    let fail = true;
    const app = await mirror({
      files: async () => {
        loads++;
        if (fail) throw new Error('dist/provider/provider.mjs is missing: run `npm run build` first');
        return files;
      },
    });
    expect(loads).toBe(0);
    const failed = await app.inject({ url: '/terraform/providers/terraform-provider-dataplatform_1.0.0_manifest.json' });
    expect([failed.statusCode, failed.json().error.message]).toEqual([
      404,
      'This service has no provider release to serve: dist/provider/provider.mjs is missing: run `npm run build` first',
    ]);
    fail = false;
    for (let i = 0; i < 3; i++) {
      const res = await app.inject({ url: '/terraform/providers/terraform-provider-dataplatform_1.0.0_manifest.json' });
      expect(res.statusCode).toBe(200);
    }
    expect(loads).toBe(2);
  });

  test('a service started without a source says it has no release', async () => {
    const app = await mirror();
    const res = await app.inject({ url: '/terraform/providers/registry.terraform.io/dataplatform/dataplatform/index.json' });
    expect([res.statusCode, res.json().error.message]).toEqual([
      404,
      'This service has no provider release to serve: the service was started without a provider mirror source',
    ]);
  });
});
