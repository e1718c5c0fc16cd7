import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * GetMetadata and GetProviderSchema depend only on the kinds in schemas/, so `npm run build`
 * encodes their answers once, and a provider start-up serves them from this file before (and
 * without) loading the provider's implementation: Terraform starts the provider several times
 * per command, often only to read its schema. The file records a fingerprint of the kinds it
 * was made from; when schemas/ has changed since, it is ignored and the answers are computed.
 *
 * This module is in the bundle's start-up chunk: node built-ins only.
 */

/** The methods answered from the file. */
export const STATIC_METHODS = ['GetMetadata', 'GetProviderSchema'] as const;
export type StaticMethod = (typeof STATIC_METHODS)[number];

const here = dirname(fileURLToPath(import.meta.url));
/** Beside the bundle (dist/provider); from src/provider it is the same directory of dist. */
export const STATIC_RESPONSES_PATH = join(here, '..', '..', 'dist', 'provider', 'static-responses.json');
const KINDS_DIR = join(here, '..', '..', 'schemas', 'kinds');

interface StaticResponsesFile {
  kinds: string;
  responses: Record<StaticMethod, string>;
}

/** A hash of every kind file, names and contents. */
export function kindsFingerprint(dir = KINDS_DIR): string {
  const hash = createHash('sha256');
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort())
    hash
      .update(file)
      .update('\0')
      .update(readFileSync(join(dir, file)))
      .update('\0');
  return hash.digest('hex');
}

export function writeStaticResponses(encoded: Record<StaticMethod, Buffer>, path = STATIC_RESPONSES_PATH): void {
  const file: StaticResponsesFile = {
    kinds: kindsFingerprint(),
    responses: Object.fromEntries(STATIC_METHODS.map((m) => [m, encoded[m].toString('base64')])) as Record<StaticMethod, string>,
  };
  writeFileSync(path, `${JSON.stringify(file)}\n`);
}

/** The encoded answers, or why they cannot be used (missing file, or made from other kinds). */
export function readStaticResponses(path = STATIC_RESPONSES_PATH): { responses: Map<StaticMethod, Buffer> } | { unusable: string } {
  let file: StaticResponsesFile;
  try {
    file = JSON.parse(readFileSync(path, 'utf8')) as StaticResponsesFile;
  } catch (err) {
    return { unusable: `${path} cannot be read (${(err as Error).message}); run npm run build` };
  }
  if (file.kinds !== kindsFingerprint())
    return { unusable: `${path} was made from other kinds than schemas/kinds holds now; run npm run build` };
  return { responses: new Map(STATIC_METHODS.map((m) => [m, Buffer.from(file.responses[m], 'base64')])) };
}
