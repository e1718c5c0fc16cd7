import { mkdtempSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// dpctl's parse cache (docs/guides/reconciler.md) goes to a directory of this run, never the user's ~/.cache;
// every worker and every CLI child process inherits it.
process.env.DPCTL_CACHE_DIR ??= mkdtempSync(join(tmpdir(), 'dp-test-cache-'));

/**
 * Two projects: everything on the embedded SQLite store, and the API suite again on a
 * throwaway PostgreSQL server (started by the global setup), so both stores are proven.
 */
export default defineConfig({
  resolve: {
    // examples/cdktf imports the construct library by the package's name, as a user's app does;
    // tests run it on the sources (one copy of each class), not on a build in dist/.
    alias: { 'dataplatform-as-code/cdktf': fileURLToPath(new URL('./src/cdktf/index.ts', import.meta.url)) },
  },
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Files share their worker's module cache instead of importing the sources afresh each: 267
    // files spent 393 s importing (44 s shared), about 4.5 minutes of a CI run on 2 cores. Every
    // test starts what it needs (services, databases, child processes) and closes it itself.
    isolate: false,
    // Vitest's default (cores - 1) is one worker on the 2-core CI machine; most test time is spent
    // waiting on terraform, cdktf and service child processes, so two workers halve the wall time.
    maxWorkers: Math.max(2, availableParallelism()),
    projects: [
      // The sqlite project gets the PostgreSQL server too: runtime tests connect connectors to it as a real source.
      { extends: true, test: { name: 'sqlite', include: ['test/**/*.test.ts'], globalSetup: ['test/support/postgres-global-setup.ts'] } },
      {
        extends: true,
        test: {
          name: 'postgres',
          include: ['test/integration/**/*.test.ts', 'test/abuse/**/*.test.ts'],
          exclude: ['test/integration/openapi/**'],
          globalSetup: ['test/support/postgres-global-setup.ts'],
          env: { DP_TEST_STORE: 'postgres' },
        },
      },
    ],
  },
});
