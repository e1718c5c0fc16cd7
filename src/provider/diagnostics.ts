import { AmbiguousCreateError, AmbiguousRequestError, ApiError, DataPlatformError, NetworkError } from '../client/index.js';
import { kind } from '../kinds/index.js';
import { UNTRUSTED_CERTIFICATE_HINT } from '../client/transport.js';
import { ProviderError } from './resource.js';
import { apiField, type AttrSpec } from './schema.js';

export type Step = { attribute_name: string } | { element_key_string: string } | { element_key_int: number };

export interface Diagnostic {
  severity: number;
  summary: string;
  detail: string;
  attribute?: AttributePath;
}

export const error = (summary: string, detail = ''): Diagnostic => ({ severity: 1, summary, detail });
/** Shown by Terraform without failing the command. */
export const warning = (summary: string, detail = ''): Diagnostic => ({ severity: 2, summary, detail });
export const isError = (d: Diagnostic) => d.severity === 1;

export type AttributePath = { steps: Step[] };

/** A path of attribute names (`['timeouts', 'create']`): blocks and attributes, no element keys. */
export const namedPath = (names: string[]): AttributePath => ({ steps: names.map((attribute_name) => ({ attribute_name })) });

/**
 * The diagnostics of one answer, collected as they are found (terraform-plugin-framework's
 * diag.Diagnostics with AddAttributeError): `attribute` is where Terraform shows one in the
 * configuration; without it, Terraform shows the whole block.
 */
export class Diagnostics {
  private readonly list: Diagnostic[] = [];

  addError(summary: string, detail = '', attribute?: AttributePath): this {
    return this.add(attribute ? { ...error(summary, detail), attribute } : error(summary, detail));
  }

  addWarning(summary: string, detail = '', attribute?: AttributePath): this {
    return this.add(attribute ? { ...warning(summary, detail), attribute } : warning(summary, detail));
  }

  add(...diagnostics: Diagnostic[]): this {
    for (const d of diagnostics) this.list.push(d);
    return this;
  }

  get hasErrors(): boolean {
    return this.list.some(isError);
  }

  /** The `diagnostics` field of the answer (tfplugin6 Diagnostic messages). */
  toProto(): Diagnostic[] {
    return [...this.list];
  }
}

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
export function attributePath(attrs: AttrSpec[], field: string, resolvable = false): AttributePath | undefined {
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
      const next: AttrSpec | undefined = (current?.shape === 'object' || current?.shape === 'objects' ? current.attrs : level)?.find(
        (a) => apiField(a) === part,
      );
      if (!next || (resolvable && steps.length)) break;
      steps.push({ attribute_name: next.name });
      current = next;
      level = next.attrs;
    }
  }
  return steps.length ? { steps } : undefined;
}

/** `['steps', 2, 'depends_on']` -> `steps[2].depends_on`. */
export function fieldName(path: (string | number)[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i ? `.${p}` : p)).join('');
}

/**
 * Attribute names and list positions as a path Terraform can place in the configuration: up to
 * (not including) the first attribute name below another attribute (see attributePath).
 */
export function placeablePath(path: (string | number)[]): AttributePath {
  const steps: Step[] = [];
  for (const p of path) {
    if (typeof p === 'number') steps.push({ element_key_int: p });
    else if (steps.length) break;
    else steps.push({ attribute_name: p });
  }
  return { steps };
}

/**
 * What to do about an error from the client, for the common cases; undefined when the message
 * says it all (field errors, 404...). Each claim matches what the provider and the client do.
 */
/** `terraform import` of `id`: the address is Terraform's to show (the provider is never told it), beside the error. */
const importCommand = (typeName: string | undefined, id: string) =>
  typeName ? `terraform import ${typeName}.<label> ${id} (the address after "with" above)` : `terraform import <resource address> ${id}`;

/** The project in a project-scoped route does not exist (or is out of the credential's reach). */
const projectNotFound = (err: ApiError) =>
  err.status === 404 && err.route.startsWith('/projects/{id}') && /^Project not found/i.test(err.serverMessage);

export function hint(err: unknown, importAs?: ImportTarget): string | undefined {
  if (err instanceof AmbiguousCreateError) {
    const id = err.scope === 'project' ? `${err.projectId}/${err.identity.value}` : err.identity.value;
    const once = kind(err.kind).onceFields;
    if (once.length) {
      return (
        `Terraform did not record this ${err.kind}, and its ${once.join(', ')} is shown only when it is created, so an existing one cannot be ` +
        `taken into the state with it. Check whether ${err.kind} ${JSON.stringify(err.identity.value)} exists; if it does, ` +
        `delete it through the API, then run terraform apply again.`
      );
    }
    return (
      `Terraform did not record this ${err.kind}, and the provider could not find out whether it was created (looking it up by ` +
      `${err.identity.field} failed too). Run terraform apply again: if the first request did create it, the service refuses ` +
      `a second ${err.kind} with the same ${err.identity.field} (409 conflict), so nothing is duplicated; then import it with ` +
      `${importCommand(importAs?.typeName, id)}.`
    );
  }
  if (err instanceof AmbiguousRequestError) {
    return 'Run terraform plan or apply again: Terraform reads the resource back from the service first, so the plan shows whether this change still needs to be made.';
  }
  if (err instanceof ApiError) {
    if (err.status === 429) {
      return 'Rate limited: the service kept answering 429 Too Many Requests beyond what the provider waits out. Try again later, or lower -parallelism (e.g. terraform apply -parallelism=2).';
    }
    if (err.status >= 500) {
      const attempts = err.attempt > 1 ? ` after ${err.attempt} attempts` : '';
      return `The service failed${attempts}. Run terraform apply again once it is healthy: this request (${err.method}) is safe to repeat, and Terraform reads resources back from the service before changing anything.`;
    }
    if (err.status === 401) {
      return "The service did not accept the credentials: check the provider block's api_key (DATAPLATFORM_API_KEY), or email and password (DATAPLATFORM_EMAIL, DATAPLATFORM_PASSWORD); an API key may have been revoked.";
    }
    if (err.status === 403) {
      return 'The credentials lack permission for this: an API key reaches only its own project, and changing resources needs read-write (users, API keys and project settings need admin); a read-only user can only read.';
    }
    // A delete refused because something references the resource: most often the delete half of
    // a replace (an immutable attribute changed) with the referrer left pointing at it.
    if (err.status === 409 && err.method === 'DELETE' && err.serverMessage.includes(' is used by ')) {
      return 'If this delete is the first half of a replace (an immutable attribute changed), the resource that uses it must be replaced with it: add lifecycle { replace_triggered_by = [<this resource>.id] } to that resource (terraform.md); otherwise change or delete that resource first.';
    }
    if (projectNotFound(err)) {
      return `No project has the id in project_id (${err.url.split('/projects/')[1]?.split('/')[0] ?? ''}): it takes a project's id (prj_...), such as dataplatform_project.<label>.id, not its name; the project may have been deleted (terraform plan then plans it again).`;
    }
    // Only a name taken is a clash with an existing object (a full project or tenant is a 409 too).
    if (err.status === 409 && err.method === 'POST' && err.serverMessage.includes('already exists')) {
      const how = importAs
        ? `${importCommand(importAs.typeName, importAs.id)}, or an import block with id = "${importAs.id}"`
        : `${importCommand(undefined, '<project_id>/<name>')} (<name> alone for tenant-level kinds)`;
      return `If the existing object is the one this resource should manage (for example created by an earlier apply that failed midway), import it with ${how}; otherwise give this one another name.`;
    }
    return undefined;
  }
  if (err instanceof NetworkError) {
    // The client's message already says what to do about an untrusted certificate.
    if (err.message.includes(UNTRUSTED_CERTIFICATE_HINT)) return undefined;
    return "Check the provider's endpoint (DATAPLATFORM_URL) and that the service is up; for a certificate error, set ca_file (DATAPLATFORM_CA_FILE) to the service's CA.";
  }
  return undefined;
}

/** The resource a failed create was for, as `terraform import` takes it. */
export interface ImportTarget {
  typeName: string;
  id: string;
}

const withHint = (detail: string, err: unknown, importAs?: ImportTarget) => {
  const h = hint(err, importAs);
  return h ? (detail ? `${detail}\n\n${h}` : h) : detail;
};

/** One diagnostic per field the service named (validation_error, unprocessable_entity), else one. */
export function diagnoseAll(err: unknown, attrs?: AttrSpec[], prefix = '', importAs?: ImportTarget): Diagnostic[] {
  if (err instanceof ApiError && err.details.length && attrs) {
    const fields = err.details.filter((d) => d.field && d.field !== '(body)');
    if (fields.length) {
      const diagnostics = new Diagnostics();
      for (const d of fields)
        diagnostics.addError(
          `${prefix}${d.field} ${d.message}`,
          `The service refused the request: ${err.message}`,
          attributePath(attrs, d.field, true),
        );
      return diagnostics.toProto();
    }
  }
  // A project that is not there is the project_id attribute's problem: Terraform shows that line.
  if (err instanceof ApiError && projectNotFound(err) && attrs?.some((a) => a.name === 'project_id'))
    return [{ ...diagnose(err, importAs), attribute: placeablePath(['project_id']) }];
  return [diagnose(err, importAs)];
}

export function diagnose(err: unknown, importAs?: ImportTarget): Diagnostic {
  if (err instanceof ProviderError) return error(err.summary, err.detail);
  if (err instanceof ApiError) return error(err.serverMessage || err.message, withHint(err.message, err, importAs));
  if (err instanceof DataPlatformError) return error(err.message, withHint('', err, importAs));
  return error('internal provider error', err instanceof Error ? (err.stack ?? err.message) : String(err));
}
