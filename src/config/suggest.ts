import { formatPath } from '../kinds/index.js';
import { buildDocumentSchema } from './document-schema.js';
import { declarableLayouts } from './layout.js';

/**
 * "Did you mean": the closest valid name to a misspelt key or kind, and where a misplaced
 * (dedented) key belongs. Only asked on the error path: nothing here runs for a valid config.
 */

/** Optimal string alignment distance (Damerau-Levenshtein with adjacent transpositions, each substring edited once). */
export function editDistance(a: string, b: string): number {
  if (a === b) return 0;
  if (!a.length) return b.length;
  if (!b.length) return a.length;
  let prev2: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, prev2[j - 2] + 1);
      cur.push(d);
    }
    prev2 = prev;
    prev = cur;
  }
  return prev[b.length];
}

/** Case, `_` and `-` do not count: `connectorType` and `Connector-Type` are `connector_type`. */
const normalize = (s: string) => s.toLowerCase().replace(/[_-]/g, '');

/**
 * The candidate closest to `word`, when it is close for its length (at most one edit up to 7
 * characters, two up to 11, then one more every 4) and no other candidate is as close; else undefined.
 */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  const w = normalize(word);
  const limit = Math.max(1, Math.floor(w.length / 4));
  let best: string | undefined;
  let bestDistance = Infinity;
  let tie = false;
  for (const c of candidates) {
    if (c === word) continue;
    const d = editDistance(w, normalize(c));
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
      tie = false;
    } else if (d === bestDistance && c !== best) tie = true;
  }
  return best !== undefined && !tie && bestDistance <= limit && bestDistance < w.length ? best : undefined;
}

/** The kind meant by an unknown kind, if one is close. */
export const suggestKind = (kind: string): string | undefined =>
  closest(
    kind,
    declarableLayouts().map((l) => l.yamlKind),
  );

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Node = Record<string, any>;
let documentSchema: Node | undefined;

/** Every schema that can apply to a value at this node: itself, $ref targets, allOf/anyOf/oneOf branches and their then/else. */
function expand(node: Node | undefined, out: Node[] = [], depth = 0): Node[] {
  if (!node || typeof node !== 'object' || depth > 8) return out;
  out.push(node);
  if (typeof node.$ref === 'string' && node.$ref.startsWith('#/$defs/'))
    expand(documentSchema!.$defs?.[node.$ref.slice('#/$defs/'.length)], out, depth + 1);
  for (const k of ['allOf', 'anyOf', 'oneOf']) for (const branch of (node[k] as Node[] | undefined) ?? []) expand(branch, out, depth + 1);
  for (const k of ['then', 'else']) expand(node[k] as Node | undefined, out, depth + 1);
  return out;
}

const keysOf = (nodes: Node[]) =>
  new Set(nodes.flatMap((n) => (n.properties && typeof n.properties === 'object' ? Object.keys(n.properties) : [])));

function childOf(nodes: Node[], part: string | number): Node[] {
  const out: Node[] = [];
  for (const n of nodes) {
    if (typeof part === 'number') {
      if (n.items && typeof n.items === 'object') expand(n.items as Node, out);
    } else if (n.properties?.[part]) expand(n.properties[part] as Node, out);
  }
  return out;
}

/** The schemas that apply at a path of a document of this kind (`[]`: the document itself). */
function schemasAt(yamlKind: string, parts: (string | number)[]): Node[] {
  documentSchema ??= buildDocumentSchema() as Node;
  const top: Node = {
    properties: {
      ...documentSchema.properties,
      metadata: { $ref: `#/$defs/${yamlKind}Metadata` },
      spec: { $ref: `#/$defs/${yamlKind}Spec` },
    },
  };
  let nodes = expand(top);
  for (const part of parts) nodes = childOf(nodes, part);
  return nodes;
}

export interface FieldSuggestion {
  /** Appended to the message: ` (did you mean connector_type?)`. */
  hint: string;
  /** The field meant, as path parts. */
  intended: (string | number)[];
}

/**
 * For an unknown key (`parts`: its path) of a document of a known kind: the mapping one level
 * down where it is a known field (a key dedented out of it), else a close spelling of a field
 * of the same mapping that the document does not already have (`present`).
 */
export function suggestField(yamlKind: string, parts: (string | number)[], present: Iterable<string>): FieldSuggestion | undefined {
  const key = parts[parts.length - 1];
  if (typeof key !== 'string') return undefined;
  const parent = parts.slice(0, -1);
  const here = schemasAt(yamlKind, parent);
  if (!here.length) return undefined;
  const known = keysOf(here);
  const under = [...known].filter((child) => keysOf(childOf(here, child)).has(key));
  if (under.length === 1) {
    const intended = [...parent, under[0], key];
    return { hint: ` (did you mean ${formatPath(intended)}, indented under ${formatPath([...parent, under[0]])}?)`, intended };
  }
  const taken = new Set(present);
  const match = closest(
    key,
    [...known].filter((k) => !taken.has(k)),
  );
  return match ? { hint: ` (did you mean ${match}?)`, intended: [...parent, match] } : undefined;
}
