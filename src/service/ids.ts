import { createHash, randomBytes } from 'node:crypto';

/** Resource ids: a kind prefix and 16 random bytes, e.g. con_4vX...; opaque to clients. */
const PREFIX: Record<string, string> = {
  project: 'prj',
  connector: 'con',
  infrastructure_resource: 'inf',
  dbt_project: 'dbt',
  pipeline: 'pip',
  alert_rule: 'arl',
  notification_channel: 'chn',
  escalation_policy: 'esc',
  classification: 'cls',
  masking_policy: 'msk',
  user: 'usr',
  api_key: 'key',
  run: 'run',
  alert: 'alt',
  tenant: 'tnt',
  session: 'ses',
};

export const newId = (kind: string) => `${PREFIX[kind] ?? kind.slice(0, 3)}_${randomBytes(12).toString('base64url')}`;
/**
 * Request ids (X-Request-Id, the logs, the audit log) need to be unique, not secret: a random
 * prefix per process and a counter (no random bytes drawn per request; the same 16 characters).
 */
let requestPrefix = randomBytes(6).toString('base64url');
let requestCounter = 0;
export const newRequestId = () => {
  // 36^8 ids per prefix; after that a new prefix (about 2.8 trillion requests).
  if (requestCounter >= 36 ** 8) [requestPrefix, requestCounter] = [randomBytes(6).toString('base64url'), 0];
  return `req_${requestPrefix}${(requestCounter++).toString(36).padStart(8, '0')}`;
};

/** Bearer secrets: 32 random bytes behind a prefix that says what they are. */
export const newSecret = (prefix: 'dpat' | 'dprt' | 'dpk' | 'dpinv') => `${prefix}_${randomBytes(32).toString('base64url')}`;

/** Tokens and keys are high-entropy, so a fast hash is enough to store them (passwords use scrypt). */
export const hashSecret = (value: string) => createHash('sha256').update(value).digest('base64url');

export const nowIso = (clock: () => number = Date.now) => new Date(clock()).toISOString();
