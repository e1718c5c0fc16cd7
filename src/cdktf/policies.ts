import type { ResourcePolicy } from '../config/index.js';
import { apiField, type AttrSpec } from '../provider/schema.js';

/**
 * A document's dpctl.dev/ policies as Terraform lifecycle meta-arguments in the YAML bridge:
 * prevent-destroy is `prevent_destroy`, ignore-fields is `ignore_changes` (API paths as
 * Terraform attribute references: `config.port` -> `config.port` on an object attribute,
 * `labels.team` -> `labels["team"]` on a map). Observe-only and disabled are handled by the
 * bridge itself (a data source; nothing).
 */
export function lifecycleOf(
  policy: ResourcePolicy,
  attrs: AttrSpec[],
): { lifecycle?: { preventDestroy?: boolean; ignoreChanges?: string[] } } {
  const ignoreChanges = policy.ignoreFields.map((parts) => attributeRef(parts, attrs));
  if (!policy.preventDestroy && !ignoreChanges.length) return {};
  return { lifecycle: { ...(policy.preventDestroy ? { preventDestroy: true } : {}), ...(ignoreChanges.length ? { ignoreChanges } : {}) } };
}

function attributeRef(parts: string[], attrs: AttrSpec[]): string {
  const [first, ...rest] = parts;
  const attr = attrs.find((a) => apiField(a) === first && !a.synthetic);
  const head = attr?.name ?? first;
  if (!rest.length) return head;
  // A map's keys are indexes in Terraform; an object's attributes are dotted.
  if (attr?.shape === 'map') return `${head}["${rest.join('.')}"]`;
  return [head, ...rest].join('.');
}
