/** Where something is written: file (as displayed), 1-based line and column. */
export interface SourceLocation {
  file: string;
  line: number;
  column: number;
}

/** One problem found in a YAML repository, reported as `file:line:column: Kind/name: field: message`. */
export interface ConfigError {
  file: string;
  /** 1-based; absent for a problem with the file as a whole (unreadable, no documents). */
  line?: number;
  column?: number;
  /** `Kind/name` of the document, when known. */
  subject?: string;
  /** Field path in the document as written (`spec.config.port`, `metadata.project`). */
  field?: string;
  message: string;
}

export const formatLocation = (loc: SourceLocation): string => `${loc.file}:${loc.line}:${loc.column}`;

export function formatConfigError(e: ConfigError): string {
  const where = e.line !== undefined ? `${e.file}:${e.line}:${e.column ?? 1}` : e.file;
  return [where, e.subject, e.field, e.message].filter((p) => p !== undefined && p !== '').join(': ');
}

/** File order as loaded (sorted paths), then position; a stable order for output and tests. */
export function sortErrors(errors: ConfigError[], fileOrder: string[] = []): ConfigError[] {
  const rank = (f: string) => {
    const i = fileOrder.indexOf(f);
    return i === -1 ? Number.MAX_SAFE_INTEGER : i;
  };
  return [...errors].sort(
    (a, b) => rank(a.file) - rank(b.file) || (a.file < b.file ? -1 : a.file > b.file ? 1 : 0) || (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0),
  );
}

/** Thrown by functions that cannot go on (toApiBody with an unresolved reference); carries every error. */
export class ConfigValidationError extends Error {
  constructor(readonly errors: ConfigError[]) {
    super(errors.map(formatConfigError).join('\n'));
    this.name = 'ConfigValidationError';
  }
}
