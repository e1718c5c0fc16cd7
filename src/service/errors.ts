/** The spec's error codes (section 7) with their HTTP statuses. */
export const ERROR_STATUS = {
  validation_error: 400,
  unauthorized: 401,
  forbidden: 403,
  resource_not_found: 404,
  conflict: 409,
  unprocessable_entity: 422,
  rate_limited: 429,
  internal_error: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ErrorDetail {
  field: string;
  message: string;
}

export class ApiError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    /** Overrides the code's usual status (413 body too large, 415 content type). */
    readonly status: number = ERROR_STATUS[code],
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  toJSON() {
    return { error: { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) } };
  }
}

export const notFound = (what: string) => new ApiError('resource_not_found', `${what} not found`);
export const forbidden = (message: string) => new ApiError('forbidden', message);
export const unauthorized = (message: string) => new ApiError('unauthorized', message);
export const conflict = (message: string) => new ApiError('conflict', message);
export const invalid = (field: string, message: string) => new ApiError('validation_error', `${field}: ${message}`, [{ field, message }]);
export const unprocessable = (message: string, details?: ErrorDetail[]) => new ApiError('unprocessable_entity', message, details);
