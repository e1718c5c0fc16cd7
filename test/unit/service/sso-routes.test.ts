import { describe, expect, test } from 'vitest';
import { parseFormBody, requireState } from '../../../src/service/routes/sso.js';
import type { ApiError } from '../../../src/service/errors.js';

describe('SSO callback inputs', () => {
  test('a callback without state is a 400 on the state field', () => {
    expect(requireState('abc')).toBe('abc');
    for (const missing of [undefined, '']) {
      let error: ApiError | undefined;
      try {
        requireState(missing);
      } catch (err) {
        error = err as ApiError;
      }
      expect([error?.code, error?.status, error?.message, error?.details]).toEqual([
        'validation_error',
        400,
        'The callback has no state parameter',
        [{ field: 'state', message: 'is required' }],
      ]);
    }
  });

  test('the SAML HTTP-POST form body, URL-decoded', () => {
    expect(parseFormBody('SAMLResponse=PHNhbWw%2BPC9zYW1sPg%3D%3D&RelayState=st_1+x')).toEqual({
      SAMLResponse: 'PHNhbWw+PC9zYW1sPg==',
      RelayState: 'st_1 x',
    });
    expect(parseFormBody('')).toEqual({});
    expect(parseFormBody('a=1&a=2')).toEqual({ a: '2' });
  });
});
