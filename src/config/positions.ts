import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';
import type { Document, LineCounter, Node, Pair } from 'yaml';
import type { SourceLocation } from './errors.js';

let yamlModule: typeof Yaml | undefined;
/**
 * The `yaml` package, loaded the first time it is needed: for positions, and for files the fast
 * path (fast-yaml.ts, js-yaml) leaves to it. A valid config never loads it (~40 ms of CPU at
 * start-up, most of a 1,000-document plan's margin over bare parsing). Loaded with require because
 * loading a config is synchronous; it is the module an `import 'yaml'` gets (its CommonJS build).
 */
export const yaml = (): typeof Yaml => (yamlModule ??= createRequire(import.meta.url)('yaml') as typeof Yaml);

/** One parsed YAML document with what is needed to point at its nodes. */
export interface YamlSource {
  file: string;
  doc: Document.Parsed;
  lineCounter: LineCounter;
}

interface Found {
  /** Deepest node reached along the path. */
  node: Node | null;
  /** The key of the last map entry reached, when the path ended on a map key. */
  key: Node | null;
  /** Whether the whole path was found. */
  complete: boolean;
}

function keyText(key: unknown): string | undefined {
  if (yaml().isScalar(key)) return String(key.value);
  if (key === null || key === undefined) return undefined;
  return String(key);
}

function find(src: YamlSource, path: (string | number)[]): Found {
  const { isAlias, isMap, isPair, isSeq } = yaml();
  let node: Node | null = (src.doc.contents as Node | null) ?? null;
  let key: Node | null = null;
  for (const seg of path) {
    if (node && isAlias(node)) node = (node.resolve(src.doc) as Node | undefined) ?? node;
    if (node && isMap(node)) {
      const pair = (node.items as Pair[]).find((p) => keyText(p.key) === String(seg));
      if (!pair) return { node, key, complete: false };
      key = isPair(pair) && pair.key && typeof pair.key === 'object' ? (pair.key as Node) : null;
      node = (pair.value as Node | null) ?? null;
      if (!node) return { node: key, key, complete: true };
    } else if (node && isSeq(node) && typeof seg === 'number') {
      const item = node.items[seg] as Node | undefined;
      if (!item) return { node, key, complete: false };
      node = item;
      key = null;
    } else {
      return { node, key, complete: false };
    }
  }
  return { node, key, complete: true };
}

function at(src: YamlSource, offset: number | undefined): SourceLocation {
  const { line, col } = src.lineCounter.linePos(offset ?? 0);
  return { file: src.file, line, column: col };
}

/** Where the value at `path` is written; the deepest existing ancestor when it is missing. */
export function valueLocation(src: YamlSource, path: (string | number)[]): SourceLocation {
  const found = find(src, path);
  return at(src, found.node?.range?.[0] ?? src.doc.range[0]);
}

/** Where the key of `path` is written (for an unknown field); its value or ancestor otherwise. */
export function keyLocation(src: YamlSource, path: (string | number)[]): SourceLocation {
  const found = find(src, path);
  if (found.complete && found.key?.range) return at(src, found.key.range[0]);
  return at(src, found.node?.range?.[0] ?? src.doc.range[0]);
}

export function documentLocation(src: YamlSource): SourceLocation {
  const contents = src.doc.contents as Node | null;
  return at(src, contents?.range?.[0] ?? src.doc.range[0]);
}

/**
 * Every node of the document with its path: for maps both the entry (at its value) and,
 * for empty values, the key. Used to build a document's field -> location map.
 */
export function walkLocations(src: YamlSource, visit: (path: (string | number)[], loc: SourceLocation) => void): void {
  const { isAlias, isMap, isSeq } = yaml();
  const walk = (node: Node | null, path: (string | number)[]) => {
    if (!node) return;
    if (isAlias(node)) node = (node.resolve(src.doc) as Node | undefined) ?? node;
    if (node.range) visit(path, at(src, node.range[0]));
    if (isMap(node)) {
      for (const pair of node.items as Pair[]) {
        const k = keyText(pair.key);
        if (k === undefined) continue;
        const value = pair.value as Node | null;
        if (value) walk(value, [...path, k]);
        else if (pair.key && typeof pair.key === 'object' && (pair.key as Node).range)
          visit([...path, k], at(src, (pair.key as Node).range![0]));
      }
    } else if (isSeq(node)) {
      node.items.forEach((item, i) => walk(item as Node, [...path, i]));
    }
  };
  walk((src.doc.contents as Node | null) ?? null, []);
}
