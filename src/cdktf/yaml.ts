import { resolve } from 'node:path';
import * as cdk from './cdk.js';
import { SCOPE_CONTAINER, setAt } from '../kinds/index.js';
import {
  ConfigValidationError,
  declaredLookup,
  loadConfig,
  resolveReferences,
  subjectOf,
  type ConfigDocument,
  type ConfigError,
} from '../config/index.js';
import { PROVIDER_TYPE, resourceSpecs } from '../provider/schema.js';
import { DATA_SOURCE_CONSTRUCTS, RESOURCE_CONSTRUCTS } from './generated/index.js';
import { bodyToConfig, camel } from './naming.js';
import { lifecycleOf } from './policies.js';
import { secretVariable } from './helpers/secrets.js';

export interface YamlPlatformProps {
  /** YAML files or directories, as `dpctl validate` / `dpctl apply` take them. */
  paths: string | string[];
  /** File names in error messages are relative to it (default: the working directory). */
  cwd?: string;
  /** The provider the resources use (default: the stack's default dataplatform provider). */
  provider?: cdk.TerraformProvider;
}

// The generated constructs' config types differ per kind; the bridge builds them from the descriptor.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyConstruct = new (scope: cdk.Construct, id: string, config: any) => cdk.TerraformResource;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDataSource = new (scope: cdk.Construct, id: string, config: any) => cdk.TerraformDataSource;

/**
 * The YAML repository of `dpctl apply` as constructs, so one repository can move between the
 * reconciler and `cdktf deploy` without rewriting. The documents are loaded and validated by
 * src/config exactly as dpctl does (same schema, same `file:line:column` errors, thrown as a
 * ConfigValidationError), then each becomes the matching construct:
 * - a reference by name (`connector: orders-db`) becomes a Terraform reference to that
 *   construct's id (`${dataplatform_connector.<...>.id}`), so Terraform orders the applies;
 * - `secretRef: { env: NAME }` becomes the sensitive Terraform variable NAME (set
 *   `TF_VAR_NAME`, e.g. `export TF_VAR_NAME="$NAME"`): dpctl reads the environment when it
 *   applies; the cdktf equivalent is a variable read at plan time, so the value is never
 *   written into cdktf.out. `secretRef: { file: path }` becomes `file("<absolute path>")`, read
 *   by Terraform at plan time, for the same reason.
 */
export class YamlPlatform extends cdk.Construct {
  readonly documents: ConfigDocument[];
  private readonly constructs = new Map<string, cdk.TerraformResource | cdk.TerraformDataSource>();

  constructor(scope: cdk.Construct, id: string, props: YamlPlatformProps) {
    super(scope, id);
    const { config, errors } = loadConfig(props.paths, { cwd: props.cwd });
    if (errors.length) throw new ConfigValidationError(errors);
    this.documents = config.documents;

    // Ids of other documents as lazy tokens: each resolves to the construct's id attribute at
    // synth time, whatever the order the documents are created in.
    const lookup = declaredLookup(this.documents, (doc) =>
      cdk.Lazy.stringValue({ produce: () => this.resourceOf(doc).getStringAttribute('id') }),
    );
    const problems: ConfigError[] = [];
    for (const doc of this.documents) {
      // dpctl.dev/reconcile: disabled: not in the stack at all (a reference to it fails at synth).
      if (doc.policy.reconcile === 'disabled') continue;
      const spec = resourceSpecs().get(`${PROVIDER_TYPE}_${doc.descriptor.kind}`);
      if (!spec) {
        problems.push({
          code: 'unsupported_kind',
          ...doc.location,
          subject: subjectOf(doc),
          message: `the Terraform provider has no resource for ${doc.yamlKind}`,
        });
        continue;
      }
      const id = `${doc.project ? `${doc.project}-` : ''}${doc.yamlKind}-${doc.name}`;
      if (doc.policy.reconcile === 'observe') {
        // Observe only: Terraform reads it (a data source) and never writes it; what references it gets its id.
        const source = DATA_SOURCE_CONSTRUCTS[spec.typeName as keyof typeof DATA_SOURCE_CONSTRUCTS] as unknown as AnyDataSource;
        const where = doc.descriptor.scope === 'project' ? { projectId: lookup(SCOPE_CONTAINER.kind, undefined, doc.project!) } : {};
        this.constructs.set(
          YamlPlatform.key(doc.descriptor.kind, doc.project, doc.name),
          new source(this, id, { [camel(doc.descriptor.identity)]: doc.name, ...where, provider: props.provider }),
        );
        continue;
      }
      const body = structuredClone(doc.body);
      for (const [field, ref] of resolveReferences(doc, lookup)) setAt(body, doc.references.find((r) => r.field === field)!.path, ref);
      for (const s of doc.secrets) {
        const value =
          'env' in s.ref
            ? secretVariable(this, s.ref.env, {
                description: `${subjectOf(doc)} ${s.yamlField} (dpctl reads $${s.ref.env}; set TF_VAR_${s.ref.env}).`,
              }).stringValue
            : cdk.Fn.file(resolve(s.baseDir, s.ref.file));
        setAt(body, s.path, value);
      }
      if (doc.descriptor.scope === 'project') body.project_id = lookup(SCOPE_CONTAINER.kind, undefined, doc.project!);
      const type = RESOURCE_CONSTRUCTS[spec.typeName as keyof typeof RESOURCE_CONSTRUCTS] as unknown as AnyConstruct;
      const config = bodyToConfig(spec.attrs, body);
      const resource = new type(this, id, { ...config, provider: props.provider, ...lifecycleOf(doc.policy, spec.attrs) });
      this.constructs.set(YamlPlatform.key(doc.descriptor.kind, doc.project, doc.name), resource);
    }
    if (problems.length) throw new ConfigValidationError(problems);
  }

  private static key(kind: string, project: string | undefined, name: string) {
    return JSON.stringify([kind, project ?? null, name]);
  }

  private resourceOf(doc: Pick<ConfigDocument, 'descriptor' | 'project' | 'name'>): cdk.TerraformResource | cdk.TerraformDataSource {
    const found = this.constructs.get(YamlPlatform.key(doc.descriptor.kind, doc.project, doc.name));
    if (!found) throw new Error(`YamlPlatform: no construct for ${doc.descriptor.kind} ${doc.name}`);
    return found;
  }

  /**
   * The construct made from a document, for references from hand-written constructs:
   * `yaml.resource('Connector', 'orders-db', 'analytics')`. Throws when there is none.
   */
  resource<T extends cdk.TerraformResource = cdk.TerraformResource>(yamlKind: string, name: string, project?: string): T {
    const doc = this.documents.find((d) => d.yamlKind === yamlKind && d.name === name && d.project === project);
    if (!doc) throw new Error(`YamlPlatform: no ${yamlKind} named "${name}"${project ? ` in project "${project}"` : ''}`);
    return this.resourceOf(doc) as T;
  }
}
