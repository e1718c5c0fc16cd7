import type { KindDescriptor } from '../kinds/index.js';
import type { DataPlatformClient } from './client.js';
import { DataPlatformError } from './errors.js';
import type { CallOptions } from './resources.js';
import { kindRoutes } from './resources.js';

export interface ConnectionTestResult {
  success: boolean;
  message: string;
}

/**
 * Tests the connection of a resource whose kind has `x-test-action` (a connector): POST
 * {item}/{action}. A failed connection is an answer (`success: false`), not an error.
 */
export async function testConnectionOf(
  client: DataPlatformClient,
  d: KindDescriptor,
  scope: { projectId?: string },
  id: string,
  options: CallOptions = {},
): Promise<ConnectionTestResult> {
  if (!d.testAction) throw new DataPlatformError(`kind ${d.kind} has no connection test (no x-test-action)`);
  const params: Record<string, string> = { resourceId: id, ...(scope.projectId ? { id: scope.projectId } : {}) };
  return (
    await client.request<ConnectionTestResult>({
      method: 'POST',
      route: `${kindRoutes(d).item}/${d.testAction}`,
      params,
      signal: options.signal,
    })
  ).body;
}
