import type { TestProject } from 'vitest/node';
import { startThrowawayPostgres } from './postgres-server.js';

/**
 * Starts a throwaway PostgreSQL server for the `postgres` test project and hands its URL
 * to the tests. DP_TEST_DATABASE_URL points at an existing server instead.
 */
export default async function setup(project: TestProject) {
  const external = process.env.DP_TEST_DATABASE_URL;
  if (external) {
    project.provide('pgUrl', external);
    return;
  }
  // Nothing a test writes needs to survive: durability off for speed.
  const server = await startThrowawayPostgres({ fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '300' });
  project.provide('pgUrl', server.url);
  return () => server.stop();
}

declare module 'vitest' {
  export interface ProvidedContext {
    pgUrl: string;
  }
}
