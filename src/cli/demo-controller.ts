import { basename, resolve } from 'node:path';
import { DataPlatformClient } from '../client/index.js';
import { startController, type RunningController } from '../controller/controller.js';
import { parseDuration } from '../controller/duration.js';
import { controllerLogger } from '../controller/logger.js';
import { parseListen } from '../controller/server.js';
import { DirectorySource } from '../controller/source/directory.js';
import type { RunningService } from '../service/server.js';
import type { LogFormat } from '../log-format.js';

export interface DemoControllerOptions {
  service: RunningService;
  slug: string;
  email: string;
  password: string;
  /** The YAML directory to keep the tenant equal to. */
  dir: string;
  /** Where the controller keeps its snapshots of the directory (under the service's data dir). */
  stateDir: string;
  interval: string;
  listen: string;
  logLevel: string;
  /** json or pretty, as the service's (default: pretty when stdout is a terminal, else json). */
  logFormat?: LogFormat;
}

/**
 * `dpctl serve --reconcile <dir>` (what `npm start` runs): the controller in the service's own
 * process, against the bootstrapped tenant, reading a plain directory so that editing a file is
 * enough to see it applied. In a cluster, `dpctl controller` runs on its own instead.
 */
export async function startDemoController(o: DemoControllerOptions): Promise<RunningController & { dir: string; url: string }> {
  const dir = resolve(o.dir);
  const client = new DataPlatformClient({
    url: new URL(o.service.baseUrl(o.slug)).origin,
    email: o.email,
    password: o.password,
    caFile: o.service.tls.certPath,
  });
  const level = o.logLevel === 'silent' || o.logLevel === 'fatal' ? 'error' : o.logLevel;
  const logger = controllerLogger(level, o.logFormat);
  const controller = await startController({
    source: new DirectorySource(dir, { snapshotDir: resolve(o.stateDir, 'dir') }),
    client,
    mode: 'apply',
    intervalMs: parseDuration(o.interval, '--reconcile-interval'),
    listen: parseListen(o.listen),
    logger,
    // Ownership label as `dpctl apply <dir>` sets it, so the two can take turns on the same tenant.
    engine: { sourceId: basename(dir) || 'root', concurrency: 4 },
  });
  return Object.assign(controller, { dir, url: controller.url! });
}
