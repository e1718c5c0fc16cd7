import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, resolveSecrets, toApiBody, type ConfigDocument, type ResolvedSecrets } from '../../../src/config/index.js';
import { kind } from '../../../src/kinds/index.js';
import { docKey, MANAGED_BY_LABEL, resourceKey, type LiveObject, type LiveResource, type LiveState } from '../../../src/engine/index.js';

/** Small configurations and live states for the engine's phases, without a service. */

export const SOURCE = 'shop-config';

/** A project, an email channel and an escalation policy that references the channel. */
export const SHOP = `
apiVersion: dataplatform/v1
kind: Project
metadata: { name: shop, labels: { team: data } }
spec: { description: The shop. }
---
apiVersion: dataplatform/v1
kind: NotificationChannel
metadata: { name: a, project: shop }
spec: { type: email, config: { email_addresses: [a@example.com] } }
---
apiVersion: dataplatform/v1
kind: EscalationPolicy
metadata: { name: escalate, project: shop }
spec:
  steps:
    - { delay_minutes: 0, channels: [a] }
`;

export interface Fixture {
  documents: ConfigDocument[];
  secrets: ResolvedSecrets;
  /** The document of `yamlKind/name`. */
  doc(yamlKind: string, name: string): ConfigDocument;
}

export function config(yaml: string, options: { allowUndeclaredProjects?: boolean } = {}): Fixture {
  const dir = mkdtempSync(join(tmpdir(), 'dp-engine-unit-'));
  writeFileSync(join(dir, 'platform.yaml'), yaml);
  const { config, errors } = loadConfig('.', { cwd: dir, allowUndeclaredProjects: options.allowUndeclaredProjects });
  if (errors.length) throw new Error(`fixture config: ${JSON.stringify(errors)}`);
  const { secrets } = resolveSecrets(config.documents, { env: {} });
  const doc = (yamlKind: string, name: string) => {
    const found = config.documents.find((d) => d.yamlKind === yamlKind && d.name === name);
    if (!found) throw new Error(`no ${yamlKind} ${name} in the fixture`);
    return found;
  };
  return { documents: config.documents, secrets, doc };
}

export const emptyState = (): LiveState => ({
  projects: new Map(),
  resources: new Map(),
  byId: new Map(),
  listed: new Set(),
  warnings: [],
});

/** Adds a live object of kind `kindName` (its identity from the object) to a state. */
export function addLive(state: LiveState, kindName: string, object: LiveObject, project?: string): LiveResource {
  const descriptor = kind(kindName);
  const key = resourceKey(descriptor, project, String(object[descriptor.identity]));
  const r: LiveResource = { descriptor, project, projectId: project && state.projects.get(project)?.id, object, key };
  state.resources.set(key, r);
  state.byId.set(object.id, r);
  if (kindName === 'project') state.projects.set(String(object.name), object);
  return r;
}

/**
 * The state of a fixture as an apply by `owner` left it: every document's body as the service
 * holds it, with ids `<kind>-<name>` and the managed-by label (none with `owner` undefined).
 */
export function appliedState(fixture: Fixture, owner: string | undefined = SOURCE): LiveState {
  const state = emptyState();
  const id = (kindName: string, name: string) => `${kindName}-${name}`;
  const lookup = (kindName: string, _project: string | undefined, name: string) => id(kindName, name);
  // Projects first: the others' projectId.
  const docs = [...fixture.documents].sort((a, b) => Number(b.descriptor.kind === 'project') - Number(a.descriptor.kind === 'project'));
  for (const doc of docs) {
    const body = toApiBody(doc, lookup, fixture.secrets);
    if (owner !== undefined) body.labels = { ...doc.labels, [MANAGED_BY_LABEL]: owner };
    const r = addLive(state, doc.descriptor.kind, { ...body, id: id(doc.descriptor.kind, doc.name) }, doc.project);
    if (r.key !== docKey(doc)) throw new Error(`fixture key mismatch for ${doc.name}`);
  }
  return state;
}

export const PLAN_OPTIONS = { sourceId: SOURCE, prune: false, allowMassDelete: false, adopt: false, specOperations: false };
