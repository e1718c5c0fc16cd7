import type { JsonSchema } from '../kinds/index.js';
import { API_VERSION, LABELS_FIELD, declarableLayouts, projectLayout, type FieldRename, type KindLayout } from './layout.js';
import { annotationsSchema } from './policies.js';

export const DOCUMENT_SCHEMA_ID = 'https://schemas.dataplatform.dev/document.json';
export const DOCUMENT_SCHEMA_FILE = 'document.schema.json';

const SECRET_REF_DEF = 'secretRef';

/** What a secret field holds in YAML: a reference, never the value. */
const secretRefSchema: JsonSchema = {
  type: 'object',
  description: 'A secret is never written inline: it is read from an environment variable or a file when applied.',
  additionalProperties: false,
  required: ['secretRef'],
  properties: {
    secretRef: {
      type: 'object',
      description: 'Exactly one of env or file.',
      additionalProperties: false,
      minProperties: 1,
      maxProperties: 1,
      properties: {
        env: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]*$', description: 'Name of an environment variable holding the value.' },
        file: {
          type: 'string',
          minLength: 1,
          description: "Path of a file holding the value, relative to the YAML file's directory; one trailing newline is dropped.",
        },
      },
    },
  },
} as JsonSchema;

const clone = <T>(v: T): T => structuredClone(v);

/** The schema node at an API path pattern ('*' = array items), following properties and items. */
function nodeAt(schema: JsonSchema, pattern: string[]): JsonSchema | undefined {
  let node: JsonSchema | undefined = schema;
  for (const seg of pattern) {
    if (!node) return undefined;
    node = seg === '*' ? node.items : node.properties?.[seg];
  }
  return node;
}

/** The node and every conditional subschema that applies to the same instance (allOf, if/then). */
function sameInstance(node: JsonSchema): JsonSchema[] {
  const out = [node];
  for (const sub of node.allOf ?? []) out.push(...sameInstance(sub));
  for (const sub of [node.if, node.then]) if (sub) out.push(...sameInstance(sub));
  return out;
}

function renameProperty(node: JsonSchema, rename: FieldRename, refTitle: string) {
  for (const part of sameInstance(node)) {
    if (part.properties && rename.api in part.properties) {
      const original = part.properties[rename.api];
      const entries = Object.entries(part.properties).map(([k, v]): [string, JsonSchema] => {
        if (k !== rename.api) return [k, v];
        const renamed = clone(v);
        const target = rename.many ? renamed.items! : renamed;
        delete target['x-ref'];
        target.minLength = 1;
        target.description = rename.many ? `Name of a ${refTitle} in the same project.` : `Name of the ${refTitle} (in the same project).`;
        renamed.description = [
          rename.many ? `Names of ${refTitle}s in the same project` : `Name of a ${refTitle} in the same project`,
          rename.many ? `(the API field ${rename.api} takes their ids).` : `(the API field ${rename.api} takes its id).`,
          original.description,
        ]
          .filter(Boolean)
          .join(' ');
        return [rename.yaml, renamed];
      });
      part.properties = Object.fromEntries(entries);
    }
    if (part.required) part.required = part.required.map((r) => (r === rename.api ? rename.yaml : r));
  }
}

const stripDefault = (s: JsonSchema | undefined): JsonSchema => {
  const out = clone(s ?? {});
  delete out.default;
  return out;
};

/**
 * The service answers a list over its `x-max-items` cap with 422 (a check of its own, not JSON
 * Schema's); in YAML the same cap is an ordinary `maxItems`, so `dpctl validate` and editors
 * flag it before any apply.
 */
function capsAsMaxItems(node: JsonSchema): void {
  const cap = (node as Record<string, unknown>)['x-max-items'];
  if (typeof cap === 'number') (node as Record<string, unknown>).maxItems = cap;
  const children = [
    ...Object.values(node.properties ?? {}),
    ...(node.items ? [node.items] : []),
    ...(node.allOf ?? []),
    ...(node.then ? [node.then] : []),
  ];
  for (const child of children) capsAsMaxItems(child);
}

/** The spec of a kind in YAML: its create schema without identity and labels, references renamed, secrets as refs. */
export function specSchema(layout: KindLayout): JsonSchema {
  const d = layout.descriptor;
  const spec = clone(d.createSchema);
  delete spec.title;
  spec.description = `${d.title}: ${d.description}`.trim();
  const moved = [d.identity, ...(layout.hasLabels ? [LABELS_FIELD] : [])];
  for (const field of moved) delete spec.properties?.[field];
  spec.required = (spec.required ?? []).filter((r) => !moved.includes(r));
  if (!spec.required.length) delete spec.required;
  for (const path of layout.secretPaths) {
    const parent = nodeAt(spec, path.slice(0, -1));
    const name = path[path.length - 1];
    const original = name === '*' ? parent?.items : parent?.properties?.[name];
    if (!parent || !original) throw new Error(`${d.kind}: secret ${path.join('.')} not found in the create schema`);
    const replacement: JsonSchema = {
      $ref: `#/$defs/${SECRET_REF_DEF}`,
      description: ['Secret (write-only): { secretRef: { env: NAME } } or { secretRef: { file: path } }.', original.description]
        .filter(Boolean)
        .join(' '),
    } as JsonSchema;
    if (name === '*') parent.items = replacement;
    else parent.properties![name] = replacement;
  }
  capsAsMaxItems(spec);
  // Deepest first, so a rename never changes the path of another one still to do.
  const renames = [...layout.renames].sort((a, b) => b.parent.length - a.parent.length);
  for (const rename of renames) {
    const node = nodeAt(spec, rename.parent);
    if (!node) throw new Error(`${d.kind}: reference ${[...rename.parent, rename.api].join('.')} not found in the create schema`);
    const clash = Object.keys(node.properties ?? {}).includes(rename.yaml);
    if (clash) throw new Error(`${d.kind}: YAML name "${rename.yaml}" of reference ${rename.api} clashes with an existing field`);
    renameProperty(node, rename, declarableLayouts().find((l) => l.descriptor.kind === rename.refKind)?.yamlKind ?? rename.refKind);
  }
  return spec;
}

export function metadataSchema(layout: KindLayout): JsonSchema {
  const d = layout.descriptor;
  const name = stripDefault(d.createSchema.properties?.[d.identity]);
  name.description = [`The ${d.title.toLowerCase()}'s ${d.identity} (its identity).`, name.description].filter(Boolean).join(' ');
  const properties: Record<string, JsonSchema> = { name };
  const required = ['name'];
  if (layout.projectScoped) {
    const p = projectLayout().descriptor;
    const project = stripDefault(p.createSchema.properties?.[p.identity]);
    project.description = 'Name of the project this resource belongs to (a Project document, or one that exists on the server).';
    properties.project = project;
    required.push('project');
  }
  if (layout.hasLabels) {
    const labels = stripDefault(d.createSchema.properties?.[LABELS_FIELD]);
    labels.description = `String labels; become the resource's ${LABELS_FIELD} field.`;
    properties.labels = labels;
  }
  properties.annotations = annotationsSchema();
  return { type: 'object', additionalProperties: false, required, properties };
}

/**
 * The JSON Schema (draft 2020-12) of one YAML document, generated from the kind schemas:
 * an if/then per kind on `kind`. Used by ajv in `dpctl validate` and by editors.
 */
export function buildDocumentSchema(): JsonSchema {
  const layouts = declarableLayouts();
  const defs: Record<string, JsonSchema> = { [SECRET_REF_DEF]: secretRefSchema };
  const branches: JsonSchema[] = [];
  for (const layout of layouts) {
    const k = layout.yamlKind;
    defs[`${k}Metadata`] = metadataSchema(layout);
    defs[`${k}Spec`] = specSchema(layout);
    const then: JsonSchema = {
      description: `${layout.descriptor.title}: ${layout.descriptor.description}`,
      properties: { metadata: { $ref: `#/$defs/${k}Metadata` } as JsonSchema, spec: { $ref: `#/$defs/${k}Spec` } as JsonSchema },
    };
    if (defs[`${k}Spec`].required?.length) then.required = ['spec'];
    branches.push({ if: { properties: { kind: { const: k } }, required: ['kind'] }, then });
  }
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: DOCUMENT_SCHEMA_ID,
    title: 'Data Platform resource document',
    description: `One Kubernetes-style document of a dataplatform YAML repository (several per file, separated by ---). Generated from schemas/kinds by \`npm run generate\`: do not edit.`,
    type: 'object',
    additionalProperties: false,
    required: ['apiVersion', 'kind', 'metadata'],
    properties: {
      apiVersion: { const: API_VERSION, description: `Always ${API_VERSION}.` },
      kind: { type: 'string', enum: layouts.map((l) => l.yamlKind), description: 'The resource kind.' },
      metadata: {
        type: 'object',
        description:
          'name (the identity), project (name of the project, for project-scoped kinds), labels, annotations (dpctl.dev/ policies).',
      },
      spec: {
        type: 'object',
        description: 'The writable fields of the resource, in snake_case; references by name; secrets as secretRef.',
      },
    },
    allOf: branches,
    $defs: defs,
  } as JsonSchema;
}

/** The file as checked in: two-space JSON and a final newline. */
export function renderDocumentSchema(): string {
  return `${JSON.stringify(buildDocumentSchema(), null, 2)}\n`;
}
