import { LABELS_FIELD } from '../../engine/diff.js';
import { attributePath, Diagnostics, fieldName, namedPath, placeablePath } from '../diagnostics.js';
import { writeOnlyConflicts, writeOnlySet } from '../resource.js';
import { settingErrors } from '../settings.js';
import { engineLabelsIn, validateConfig } from '../validate.js';
import type { DynamicValue } from '../values.js';
import { objectOf, type ProviderContext } from './context.js';

export interface ValidateResourceConfigRequest {
  type_name: string;
  config?: DynamicValue;
  client_capabilities?: { write_only_attributes_allowed?: boolean };
}

/**
 * ValidateResourceConfig: what `terraform validate` and every plan check before anything is sent:
 * write-only attributes (both forms given; a Terraform too old for them), the settings blocks,
 * and the kind's create schema as the API would apply it, each at the attribute it is about.
 */
export function validateResourceConfig(ctx: ProviderContext, req: ValidateResourceConfigRequest) {
  const h = ctx.resource(req.type_name);
  const config = objectOf(req.config);
  const diagnostics = new Diagnostics();
  for (const path of writeOnlyConflicts(h.spec.attrs, config))
    diagnostics.addError(
      `${req.type_name}: give either ${path} or ${path}_wo, not both`,
      '',
      placeablePath(path.split('.').map((p) => (/^\d+$/.test(p) ? Number(p) : p))),
    );
  // A Terraform without write-only support (before 1.11) would keep `_wo` values in the plan and the state.
  if (!req.client_capabilities?.write_only_attributes_allowed) {
    for (const path of writeOnlySet(h.spec.attrs, config)) {
      const name = fieldName(path);
      const plain = name.replace(/_wo$/, '');
      diagnostics.addError(
        `${req.type_name}: ${name} is write-only, which needs Terraform 1.11 or later`,
        `This Terraform does not support write-only attributes (it did not announce write_only_attributes_allowed), so it would keep the value in the plan and the state. Upgrade to Terraform 1.11 or later, or set ${plain} instead of ${name} and ${name}_version.`,
        placeablePath(path),
      );
    }
  }
  const engineLabels = engineLabelsIn(config);
  if (engineLabels.length)
    diagnostics.addError(
      `${req.type_name}: labels ${engineLabels.map((l) => `"${l}"`).join(' and ')} belong to dpctl: remove them from the configuration`,
      'A resource labelled "dpctl.dev/managed-by" counts as managed by that dpctl source, and `dpctl apply --prune` there deletes it once its YAML document is gone, although Terraform manages it. ' +
        '`terraform plan -generate-config-out` copies these labels from an imported resource: delete them from the generated configuration, and the next apply removes them from the resource (docs/guides/terraform.md, "Taking over what dpctl manages").',
      placeablePath([LABELS_FIELD]),
    );
  // Settings live in blocks (`timeouts`), which Terraform can place down to the attribute.
  for (const e of settingErrors(config)) diagnostics.addError(`${req.type_name}: ${e.path.join('.')} ${e.message}`, '', namedPath(e.path));
  for (const e of validateConfig(h.spec, config))
    diagnostics.addError(`${req.type_name}: ${e.field} ${e.message}`, '', attributePath(h.spec.attrs, e.field, true));
  return { diagnostics: diagnostics.toProto() };
}
