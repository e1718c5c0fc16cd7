import * as cdk from '../cdk.js';
import { kind as kindNamed, type JsonSchema } from '../../kinds/index.js';
import { PROVIDER_TYPE } from '../../provider/schema.js';
import type { PipelineSteps } from '../generated/pipeline.js';
import { propName } from '../naming.js';

/**
 * What a step runs, read from the pipeline schema rather than written here: each
 * `if type = X then required [field]` rule of a step, with the field's x-ref, says that a step
 * on a construct of that kind has type X and carries the construct's id in that field
 * (connector -> connector_sync/connector_id, dbt_project -> dbt_run/dbt_project_id, ...).
 */
interface StepTarget {
  type: string;
  field: string;
}

let targets: Map<string, StepTarget> | undefined;
function stepTargets(): Map<string, StepTarget> {
  if (targets) return targets;
  targets = new Map();
  const item = kindNamed('pipeline').schema.properties?.steps?.items as JsonSchema;
  for (const rule of item.allOf ?? []) {
    const type = rule.if?.properties?.type?.const;
    const field = rule.then?.required?.[0];
    const ref = field ? item.properties?.[field]?.['x-ref'] : undefined;
    if (typeof type === 'string' && field && ref) targets.set(`${PROVIDER_TYPE}_${ref}`, { type, field });
  }
  return targets;
}

/** The kinds of construct a step can run (their Terraform types). */
export const stepTargetTypes = () => [...stepTargets().keys()];

export interface StepOptions {
  /** Steps that must finish first. They must be steps of the same pipeline. */
  after?: Step[];
}

/** A pipeline step on a construct (a connector to sync, a dbt project to run, a channel to notify). */
export class Step {
  readonly type: string;
  readonly after: Step[];

  constructor(
    readonly name: string,
    readonly target: cdk.TerraformResource,
    options: StepOptions = {},
  ) {
    const t = stepTargets().get(target.terraformResourceType);
    if (!t)
      throw new Error(
        `step "${name}": a pipeline step cannot run a ${target.terraformResourceType} (it runs ${stepTargetTypes().join(', ')})`,
      );
    this.type = t.type;
    this.after = options.after ?? [];
  }

  /** The step as the Pipeline construct takes it: the target's id as a token reference. */
  toConfig(): PipelineSteps {
    const field = stepTargets().get(this.target.terraformResourceType)!.field;
    const id = this.target.getStringAttribute('id');
    const config: Record<string, unknown> = { name: this.name, type: this.type, [propName({ name: field }, true)]: id };
    if (this.after.length) config.dependsOn = this.after.map((s) => s.name);
    return config as unknown as PipelineSteps;
  }
}

/** step(name, target, { after }) */
export const step = (name: string, target: cdk.TerraformResource, options?: StepOptions) => new Step(name, target, options);

/**
 * The steps as Pipeline config, checked here rather than at apply time: names unique and
 * every `after` step part of the same list (the API also rejects cycles; a Step can only name
 * steps built before it, so a list built from Step objects has none).
 */
export function pipelineSteps(steps: Step[]): PipelineSteps[] {
  const names = new Set<string>();
  for (const s of steps) {
    if (names.has(s.name)) throw new Error(`pipeline steps: two steps are named "${s.name}"`);
    names.add(s.name);
  }
  for (const s of steps)
    for (const a of s.after)
      if (!steps.includes(a))
        throw new Error(`pipeline steps: step "${s.name}" runs after "${a.name}", which is not a step of this pipeline`);
  return steps.map((s) => s.toConfig());
}
