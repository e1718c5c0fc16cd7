/**
 * What the provider keeps in a resource's private state (bytes Terraform stores beside the state
 * and hands back, never shown): that the last connection test (`run_setup_tests`) failed. An
 * update whose test failed is saved as configured, so without it the identical apply run again
 * had nothing to do and passed, with the connection as broken as before.
 */
export interface PrivateState {
  setupTestFailed?: true;
}

export function decodePrivate(bytes: unknown): PrivateState {
  if (!(bytes instanceof Uint8Array) || bytes.length === 0) return {};
  try {
    const value = JSON.parse(Buffer.from(bytes).toString('utf8')) as unknown;
    return value && typeof value === 'object' && (value as PrivateState).setupTestFailed === true ? { setupTestFailed: true } : {};
  } catch {
    return {}; // bytes of an older provider, or none of ours: nothing to remember
  }
}

export const encodePrivate = (p: PrivateState): Uint8Array =>
  p.setupTestFailed ? Buffer.from(JSON.stringify({ setupTestFailed: true })) : new Uint8Array(0);
