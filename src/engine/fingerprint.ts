import { createHash, createHmac } from 'node:crypto';
import { SECRETS_SHA_LABEL } from './diff.js';

/**
 * The fingerprint of a resource's secret values, kept in its `dpctl.dev/secrets-sha` label so that
 * a changed secret is found without reading it back (secrets are write-only).
 *
 * Unkeyed (the default), it is SHA-256 of the resource's identity and its secrets, 16 hex digits:
 * anyone who can read the resource can test guesses of a weak secret against it offline. With a
 * key in DPCTL_FINGERPRINT_KEY it is an HMAC (`hmac:` and 32 hex digits), which nobody without the
 * key can test guesses against. Every run that plans the config (CI, the controller, a laptop)
 * needs the same key: a run without it cannot compare a keyed fingerprint, and leaves the secrets
 * and the label as they are (see fingerprintFor).
 */

export const FINGERPRINT_KEY_ENV = 'DPCTL_FINGERPRINT_KEY';
const KEYED = 'hmac:';

export const isKeyed = (label: string | undefined): boolean => !!label?.startsWith(KEYED);

/** The fingerprint of `secrets` for the resource `identity`, keyed with `key` when one is given. */
export function secretsFingerprint(identity: string, secrets: { field: string; value: string }[], key?: string): string {
  const h = key ? createHmac('sha256', key) : createHash('sha256');
  h.update(identity);
  for (const s of [...secrets].sort((a, b) => a.field.localeCompare(b.field))) h.update(`\0${s.field}\0${s.value}`);
  return key ? `${KEYED}${h.digest('hex').slice(0, 32)}` : h.digest('hex').slice(0, 16);
}

/**
 * The label a plan writes, and a note when the comparison is not the usual one: a keyed live
 * fingerprint and no key here (not compared: the live label is kept, so runs without the key do
 * not undo the ones with it), or a key here and an unkeyed live one (set again once, keyed).
 */
export function fingerprintFor(
  identity: string,
  secrets: { field: string; value: string }[],
  live: string | undefined,
  key: string | undefined,
): { label: string; note?: string } {
  if (isKeyed(live) && !key)
    return {
      label: live!,
      note: `secrets not compared: their fingerprint was written with ${FINGERPRINT_KEY_ENV}, which this run does not have (set it to compare them)`,
    };
  const label = secretsFingerprint(identity, secrets, key);
  if (key && live !== undefined && !isKeyed(live))
    return { label, note: `the fingerprint becomes keyed (${FINGERPRINT_KEY_ENV}): the secrets are set again once` };
  return { label };
}

/** Env -> key: unset or empty is no key. */
export const fingerprintKeyOf = (env: NodeJS.ProcessEnv): string | undefined => env[FINGERPRINT_KEY_ENV] || undefined;

/** What unkeyedFingerprintWarning reads of a planned change. */
interface WritesSecrets {
  action: string;
  labels?: Record<string, string>;
  changes: readonly { sensitive?: boolean }[];
}

/**
 * The plan's one warning that it writes unkeyed fingerprints (creates, and updates that set
 * secrets), with what to do about it; undefined with a key, or when no secret is written.
 */
export function unkeyedFingerprintWarning(changes: readonly WritesSecrets[], key: string | undefined): string | undefined {
  const label = SECRETS_SHA_LABEL;
  if (key) return undefined;
  const writing = changes.filter(
    (c) =>
      c.labels?.[label] !== undefined &&
      !isKeyed(c.labels[label]) &&
      (c.action === 'create' || c.action === 'replace' || (c.action === 'update' && c.changes.some((f) => f.sensitive))),
  ).length;
  return unkeyedWarningFor(writing);
}

/** The warning for `writing` resources getting an unkeyed fingerprint (undefined for none). */
export function unkeyedWarningFor(writing: number): string | undefined {
  if (!writing) return undefined;
  return `${writing} resource${writing === 1 ? '' : 's'} get${writing === 1 ? 's' : ''} an unkeyed fingerprint of ${writing === 1 ? 'its' : 'their'} secrets (label ${SECRETS_SHA_LABEL}): whoever can read ${writing === 1 ? 'it' : 'them'} can test guesses of a weak secret offline. Set ${FINGERPRINT_KEY_ENV}, the same in every run that applies this config, to key it (docs/security.md, "Secrets fingerprints").`;
}
