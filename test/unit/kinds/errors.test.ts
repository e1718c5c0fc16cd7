import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderErrorDocs } from '../../../scripts/generate-error-docs.js';
import { API_ERROR_CODES, API_ERRORS, PROBLEM_CODES, PROVIDER_CODES, apiCodeForStatus } from '../../../src/kinds/errors.js';

const DOC = readFileSync(join(import.meta.dirname, '..', '..', '..', 'docs', 'guides', 'errors.md'), 'utf8');

/** The rows of the docs page's tables: code -> the rest of its row. */
const documented = new Map([...DOC.matchAll(/^\| `([a-z_]+)` \|(.*)$/gm)].map((m) => [m[1], m[2]] as const));

describe('error-code catalogue', () => {
  it('is what the tables of docs/guides/errors.md show (regenerate with `npm run generate`)', () => {
    expect(DOC, 'docs/guides/errors.md is stale: run `npm run generate`').toBe(renderErrorDocs(DOC));
  });

  it("holds exactly the spec's section 7 codes, each with the spec's status", () => {
    expect(Object.fromEntries(API_ERROR_CODES.map((c) => [c, API_ERRORS[c].status]))).toEqual({
      validation_error: 400,
      unauthorized: 401,
      forbidden: 403,
      resource_not_found: 404,
      conflict: 409,
      unprocessable_entity: 422,
      rate_limited: 429,
      internal_error: 500,
    });
  });

  it('documents every code, API and configuration alike, with its status', () => {
    for (const code of API_ERROR_CODES)
      expect(documented.get(code), `${code} in docs/guides/errors.md`).toContain(String(API_ERRORS[code].status));
    for (const code of [...Object.keys(PROBLEM_CODES), ...Object.keys(PROVIDER_CODES)])
      expect(documented.has(code), `${code} in docs/guides/errors.md`).toBe(true);
    // And nothing on the page that the catalogue does not have.
    expect([...documented.keys()].sort()).toEqual(
      [...API_ERROR_CODES, ...Object.keys(PROBLEM_CODES), ...Object.keys(PROVIDER_CODES)].sort(),
    );
  });

  it('gives an answer without the envelope the code of its status', () => {
    expect([400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 502, 418].map(apiCodeForStatus)).toEqual([
      'validation_error',
      'unauthorized',
      'forbidden',
      'resource_not_found',
      'conflict',
      'validation_error',
      'validation_error',
      'unprocessable_entity',
      'rate_limited',
      'internal_error',
      'internal_error',
      'http_418',
    ]);
  });
});
