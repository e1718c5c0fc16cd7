import type { FastifyInstance } from 'fastify';
import { ApiError } from './errors.js';

/** Where the service publishes the package's own Terraform provider release. */
export const PROVIDER_MIRROR_PREFIX = '/terraform/providers/';

/**
 * The content of the provider mirror. The service never builds a release itself (that is the
 * client side's src/distribution, which the service must not import): whoever starts it passes
 * one in (`dpctl serve` builds the package's release, src/cli/serve.ts).
 */
export interface ProviderMirrorSource {
  /** Every file of the release by its path relative to the mirror root; rejects when there is no release. */
  files(): Promise<ReadonlyMap<string, Buffer>>;
}

const CONTENT_TYPES: Array<[RegExp, string]> = [
  [/\.json$/, 'application/json'],
  [/\.zip$/, 'application/zip'],
  [/_SHA256SUMS$/, 'text/plain; charset=utf-8'],
];

/** The Content-Type of a file of the release. */
export const mirrorContentType = (path: string): string =>
  CONTENT_TYPES.find(([pattern]) => pattern.test(path))?.[1] ?? 'application/octet-stream';

/** A service started without a source has no release; it says so on every request. */
const NO_SOURCE: ProviderMirrorSource = {
  files: () => Promise.reject(new Error('the service was started without a provider mirror source')),
};

/**
 * Serves the provider release of `source` under /terraform/providers/ on every host, without a
 * token, as a Terraform provider network mirror:
 * `provider_installation { network_mirror { url = "https://<host>/terraform/providers/" } }`.
 * The release is loaded on the first request and kept (a failed load is tried again on the next
 * one): it only changes with the package. A service without a release (one started from sources
 * that were never built has no bundle) says so with a 404.
 */
export function registerProviderMirror(app: FastifyInstance, source: ProviderMirrorSource = NO_SOURCE): void {
  let release: Promise<ReadonlyMap<string, Buffer>> | undefined;
  app.get(
    `${PROVIDER_MIRROR_PREFIX}*`,
    { schema: { hide: true }, config: { settings: { tenantless: true, public: true } } },
    async (req, reply) => {
      const path = (req.params as { '*': string })['*'];
      let files: ReadonlyMap<string, Buffer>;
      try {
        files = await (release ??= source.files());
      } catch (err) {
        release = undefined;
        throw new ApiError('resource_not_found', `This service has no provider release to serve: ${(err as Error).message}`);
      }
      const body = files.get(path);
      if (!body) throw new ApiError('resource_not_found', `No file ${PROVIDER_MIRROR_PREFIX}${path} in the provider release`);
      return reply.header('Content-Type', mirrorContentType(path)).header('Cache-Control', 'public, max-age=300').send(body);
    },
  );
}
