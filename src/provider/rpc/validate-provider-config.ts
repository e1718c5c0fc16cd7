import { Diagnostics, namedPath } from '../diagnostics.js';
import type { DynamicValue, TfObject } from '../values.js';
import { objectOf, present } from './context.js';

/**
 * Settings in the provider block that contradict each other. The environment only fills what the
 * block leaves out, so a conflict between the block and a variable is not one; two credentials in
 * the block are a mistake Terraform should point at, not one to settle silently.
 */
export function providerConfigConflicts(config: TfObject | null): { attribute: string; summary: string; detail: string }[] {
  const c = config ?? {};
  const out: { attribute: string; summary: string; detail: string }[] = [];
  if (present(c.api_key)) {
    for (const name of ['email', 'password'] as const)
      if (present(c[name]))
        out.push({
          attribute: name,
          summary: `give either api_key or email and password, not both`,
          detail: `The provider block sets api_key and ${name}. Remove api_key to sign in with email and password, or remove ${name} to use the API key.`,
        });
  }
  if (c.insecure === true && present(c.ca_file))
    out.push({
      attribute: 'insecure',
      summary: 'give either ca_file or insecure = true, not both',
      detail: 'ca_file makes the provider trust that CA; insecure = true turns certificate checks off. Keep ca_file.',
    });
  return out;
}

/** ValidateProviderConfig: the provider block's conflicts, each at its attribute. */
export function validateProviderConfig(req: { config?: DynamicValue }) {
  const diagnostics = new Diagnostics();
  for (const c of providerConfigConflicts(objectOf(req.config))) diagnostics.addError(c.summary, c.detail, namedPath([c.attribute]));
  return { diagnostics: diagnostics.toProto() };
}
