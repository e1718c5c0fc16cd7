import { ApiError, DataPlatformError } from '../client/index.js';
import { ProviderError } from './resource.js';
import { apiField, type AttrSpec } from './schema.js';

type Step = { attribute_name: string } | { element_key_string: string } | { element_key_int: number };

export interface Diagnostic {
  severity: number;
  summary: string;
  detail: string;
  attribute?: { steps: Step[] };
}

export const error = (summary: string, detail = ''): Diagnostic => ({ severity: 1, summary, detail });

/**
 * An API field path (`target.connector_id`, `steps[1].depends_on`, `labels.team`) as a
 * Terraform attribute path, following the attribute specs so that map keys become string
 * keys and list positions integer keys. Undefined when the field is not an attribute.
 *
 * With `resolvable`, the path ends before the first attribute name below another attribute:
 * Terraform (1.11) finds a diagnostic's place in the configuration through block and index
 * steps only, and for `target.connector_id` (a nested attribute) it falls back to the whole
 * resource block; `target` shows the line of the attribute. The summary names the full field.
 */
export function attributePath(attrs: AttrSpec[], field: string, resolvable = false): { steps: Step[] } | undefined {
  const parts = field.split(/\.|\[(\d+)\]/).filter((p) => p !== undefined && p !== '');
  const steps: Step[] = [];
  let level: AttrSpec[] | undefined = attrs;
  let current: AttrSpec | undefined;
  for (const part of parts) {
    if (current?.shape === 'map') {
      steps.push({ element_key_string: part });
      current = undefined;
      level = undefined;
    } else if (/^\d+$/.test(part) && (current?.shape === 'list' || current?.shape === 'objects')) {
      steps.push({ element_key_int: Number(part) });
      if (current.shape === 'list') current = undefined;
    } else {
      const next: AttrSpec | undefined = (current?.shape === 'object' || current?.shape === 'objects' ? current.attrs : level)?.find((a) => apiField(a) === part);
      if (!next || (resolvable && steps.length)) break;
      steps.push({ attribute_name: next.name });
      current = next;
      level = next.attrs;
    }
  }
  return steps.length ? { steps } : undefined;
}

/** One diagnostic per field the service named (validation_error, unprocessable_entity), else one. */
export function diagnoseAll(err: unknown, attrs?: AttrSpec[], prefix = ''): Diagnostic[] {
  if (err instanceof ApiError && err.details.length && attrs) {
    const fields = err.details.filter((d) => d.field && d.field !== '(body)');
    if (fields.length) {
      return fields.map((d) => {
        const attribute = attributePath(attrs, d.field, true);
        const diag = error(`${prefix}${d.field} ${d.message}`, `The service refused the request: ${err.message}`);
        return attribute ? { ...diag, attribute } : diag;
      });
    }
  }
  return [diagnose(err)];
}

export function diagnose(err: unknown): Diagnostic {
  if (err instanceof ProviderError) return error(err.summary, err.detail);
  if (err instanceof ApiError) return error(err.serverMessage || err.message, err.message);
  if (err instanceof DataPlatformError) return error(err.message);
  return error('internal provider error', err instanceof Error ? (err.stack ?? err.message) : String(err));
}
