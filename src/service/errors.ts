import { API_ERRORS, type ApiErrorCode } from '../kinds/errors.js';

/** The spec's error codes (section 7), from the one catalogue (kinds/errors.ts). */
export type ErrorCode = ApiErrorCode;

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
    readonly status: number = API_ERRORS[code].status,
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

/**
 * 409 for an identity already taken: `A connector with name "orders" already exists in this project`.
 * `subject` starts the sentence ("A connector"); `where`, when given, ends it ("in this project").
 */
export const alreadyExists = (subject: string, field: string, value: string, where = '') =>
  conflict(`${subject} with ${field} "${value}" already exists${where ? ` ${where}` : ''}`);
