import type { JsonSchema, KindDescriptor } from '../../kinds/index.js';
import { formatPath, valuesAt, walkProperties, type FieldPath } from '../../kinds/index.js';
import { unprocessable } from '../errors.js';
import type { KindBehaviour } from './types.js';

/** A list a tenant can grow, and how long it may be: the `x-max-items` keyword of the kind's schema. */
export interface ItemCap {
  path: FieldPath;
  max: number;
}

/**
 * Every `x-max-items` of a schema, outer lists first. It is ours rather than JSON Schema's
 * `maxItems` because the issue asks for 422 unprocessable_entity (request validation answers
 * 400): the body is well-formed, the service will not take that much of it.
 */
export function itemCaps(schema: JsonSchema): ItemCap[] {
  const caps: ItemCap[] = [];
  walkProperties(schema, (path, prop) => {
    const max = prop['x-max-items'];
    if (typeof max === 'number') caps.push({ path, max });
  });
  return caps.sort((a, b) => a.path.length - b.path.length);
}

/** The lists of `data` over their cap, named the way users write them (`steps`, `steps[2].channel_ids`). */
export function capProblems(caps: ItemCap[], data: Record<string, unknown>): { field: string; message: string }[] {
  const problems: { field: string; message: string }[] = [];
  const over: FieldPath[] = [];
  for (const cap of caps) {
    // Inside a list already over its cap, nothing more is looked at: the answer is the same and the work is bounded.
    if (over.some((o) => o.every((part, i) => cap.path[i] === part))) continue;
    for (const { path, value } of valuesAt(data, cap.path)) {
      if (!Array.isArray(value) || value.length <= cap.max) continue;
      problems.push({ field: formatPath(path), message: `has ${value.length} items; at most ${cap.max} are allowed` });
      over.push(cap.path);
    }
  }
  return problems;
}

/** Refuses `data` with 422 unprocessable_entity naming every list over its cap. */
function assertWithinCaps(caps: ItemCap[], data: Record<string, unknown>): void {
  const problems = capProblems(caps, data);
  if (problems.length) throw unprocessable(problems.map((p) => `${p.field} ${p.message}`).join('; '), problems);
}

/** Adds the cap check, before its own validate, to a kind's behaviour; a kind without caps keeps it as is. */
export function withItemCaps(d: KindDescriptor, behaviour: KindBehaviour | undefined): KindBehaviour | undefined {
  const caps = itemCaps(d.schema);
  if (!caps.length) return behaviour;
  return {
    ...behaviour,
    async validate(draft, scope) {
      assertWithinCaps(caps, draft.data);
      await behaviour?.validate?.(draft, scope);
    },
  };
}

/**
 * The cap check as a route's preValidation hook, before the schema is checked: Ajv reports every
 * bad item of a list (all errors), so a 1 MiB body of 500,000 wrong items cost 0.2 s of the event
 * loop before the cap refused it anyway. The answer is the cap's 422; a body within the caps goes
 * on to the schema as before. Undefined for a kind without caps.
 */
export function capsBeforeValidation(d: KindDescriptor): ((req: { body?: unknown }) => Promise<void>) | undefined {
  const caps = itemCaps(d.schema);
  if (!caps.length) return undefined;
  return async (req) => {
    const body = req.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) return;
    assertWithinCaps(caps, body as Record<string, unknown>);
  };
}
