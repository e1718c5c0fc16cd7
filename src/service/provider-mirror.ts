import type { FastifyInstance } from 'fastify';
import { buildRelease, type ProviderRelease } from '../distribution/provider-release.js';
import { ApiError } from './errors.js';

/** Where the service publishes the package's own Terraform provider release. */
export const PROVIDER_MIRROR_PREFIX = '/terraform/providers/';

const CONTENT_TYPES: Array<[RegExp, string]> = [
  [/\.json$/, 'application/json'],
  [/\.zip$/, 'application/zip'],
  [/_SHA256SUMS$/, 'text/plain; charset=utf-8'],
];

/**
 * Serves the package's provider release (src/distribution/provider-release.ts) under
 * /terraform/providers/ on every host, without a token, as a Terraform provider network mirror:
 * `provider_installation { network_mirror { url = "https://<host>/terraform/providers/" } }`.
 * The release is built on the first request (zipping runs on zlib's thread pool) and kept: it
 * only changes with the package. A service started from sources that were never built has no
 * bundle, and says so with a 404.
 */
export function registerProviderMirror(app: FastifyInstance): void {
  let release: Promise<ProviderRelease> | undefined;
  app.get(
    `${PROVIDER_MIRROR_PREFIX}*`,
    { schema: { hide: true }, config: { settings: { tenantless: true, public: true } } },
    async (req, reply) => {
      const path = (req.params as { '*': string })['*'];
      let files: ProviderRelease['files'];
      try {
        files = (await (release ??= buildRelease())).files;
      } catch (err) {
        release = undefined;
        throw new ApiError('resource_not_found', `This service has no provider release to serve: ${(err as Error).message}`);
      }
      const body = files.get(path);
      if (!body) throw new ApiError('resource_not_found', `No file ${PROVIDER_MIRROR_PREFIX}${path} in the provider release`);
      const type = CONTENT_TYPES.find(([pattern]) => pattern.test(path))?.[1] ?? 'application/octet-stream';
      return reply.header('Content-Type', type).header('Cache-Control', 'public, max-age=300').send(body);
    },
  );
}
