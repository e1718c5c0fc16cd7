import * as cdk from '../cdk.js';

export interface SecretOptions {
  description?: string;
}

/**
 * A secret read from a sensitive Terraform variable, as a string token for a construct config.
 * The value never enters the synthesized JSON: Terraform reads it at plan time from
 * `TF_VAR_<name>` (or -var / a .tfvars file) and keeps it out of its output. The variable is
 * declared once per stack, at the top, so its name is exactly `name` (a nested construct would
 * get a hashed name, and TF_VAR_ would no longer find it); asking twice gives the same variable.
 */
export function secretVariable(scope: cdk.Construct, name: string, options: SecretOptions = {}): cdk.TerraformVariable {
  const stack = cdk.TerraformStack.of(scope);
  const existing = stack.node.tryFindChild(name);
  if (existing) {
    if (!(existing instanceof cdk.TerraformVariable))
      throw new Error(`secretVariable: "${name}" is already the id of another construct in stack ${stack.node.id}`);
    return existing;
  }
  return new cdk.TerraformVariable(stack, name, {
    type: 'string',
    sensitive: true,
    nullable: false,
    description: options.description ?? `Secret (set TF_VAR_${name}).`,
  });
}

/** The value of secretVariable(scope, name) as a string token. */
export const secret = (scope: cdk.Construct, name: string, options: SecretOptions = {}): string =>
  secretVariable(scope, name, options).stringValue;
