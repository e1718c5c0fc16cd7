import type { ResourcePolicy } from './policies.js';
import type { KindDescriptor } from '../kinds/index.js';
import type { SourceLocation } from './errors.js';
import type { KindLayout } from './layout.js';

/** Where a secret comes from: exactly one of an environment variable or a file. */
export type SecretRef = { env: string } | { file: string };

/** A reference written by name in YAML, at an API field that holds an id. */
export interface DocumentReference {
  /** Concrete API path (`['steps', 0, 'connector_id']`). */
  path: (string | number)[];
  /** Formatted API path: `steps[0].connector_id`. */
  field: string;
  /** As written in the document: `spec.steps[0].connector`. */
  yamlField: string;
  /** Kind referenced (descriptor kind: `connector`). */
  kind: string;
  yamlKind: string;
  /** Name of the referenced resource. */
  name: string;
  location: SourceLocation;
}

/** A secret field, written as a secretRef. */
export interface DocumentSecret {
  path: (string | number)[];
  field: string;
  yamlField: string;
  ref: SecretRef;
  /** Where the secretRef's env or file value is written. */
  location: SourceLocation;
  /** Directory of the YAML file (absolute): file references are relative to it. */
  baseDir: string;
  /** For a file reference, the file as displayed in messages (relative like the YAML file's name). */
  displayFile?: string;
}

/** One validated YAML document, in the shape of the API. */
export interface ConfigDocument {
  descriptor: KindDescriptor;
  layout: KindLayout;
  yamlKind: string;
  /** metadata.name: the value of the kind's identity field (a project's name, a user's email). */
  name: string;
  /** The descriptor's identity field (`name`, `email`) and its value. */
  identity: { field: string; value: string };
  /** metadata.project: the project's name; undefined for tenant-level kinds. */
  project?: string;
  labels: Record<string, string>;
  /**
   * The API create body as declared: API field names, identity and labels included,
   * references still names, secrets still `{ secretRef }`. Defaults are not filled in.
   */
  body: Record<string, unknown>;
  references: DocumentReference[];
  secrets: DocumentSecret[];
  /** Where the document starts. */
  location: SourceLocation;
  /** API field path (formatted: `steps[0].connector_id`, `labels.team`) -> where it is written. */
  locations: Map<string, SourceLocation>;
  /** File as displayed, its absolute path and the document's index in it (0-based). */
  source: { file: string; absolutePath: string; index: number };
  /** Its dpctl.dev/ annotations (policies.ts); the shared DEFAULT_POLICY when it has none. */
  policy: ResourcePolicy;
}

export interface LoadedConfig {
  /** Files read, sorted, as displayed. */
  files: string[];
  /** Valid documents in file order, then document order. */
  documents: ConfigDocument[];
}

/** `Kind/name`, the way documents are named in messages. */
export const subjectOf = (doc: Pick<ConfigDocument, 'yamlKind' | 'name'>) => `${doc.yamlKind}/${doc.name}`;

/** Where an API field of a document is written: the field, else its nearest written ancestor, else the document. */
export function locationOf(doc: ConfigDocument, field: string): SourceLocation {
  let f = field;
  while (f) {
    const found = doc.locations.get(f);
    if (found) return found;
    const cut = Math.max(f.lastIndexOf('.'), f.lastIndexOf('['));
    f = cut > 0 ? f.slice(0, cut) : '';
  }
  return doc.location;
}
