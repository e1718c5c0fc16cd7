import {
  constructFromEvents,
  defineScalarTag,
  EVENT_ID,
  getScalarValue,
  mapTag,
  NOT_RESOLVED,
  parseEvents,
  Schema,
  seqTag,
  strTag,
  type Event,
  type ScalarEvent,
} from 'js-yaml';

/**
 * The fast path of YAML loading. The `yaml` package (the reference: its errors, positions and
 * values are what users see) takes about 0.15 ms per document; js-yaml's event parser about a
 * tenth of that. So every file is first read with js-yaml, restricted to what both agree on:
 *
 * - scalars resolve exactly as the `yaml` package's YAML 1.2 core schema does (its own tag tests
 *   and resolvers are used), quoted and block scalars are strings;
 * - anything where the two libraries could differ is not taken: anchors, aliases, merge keys,
 *   tags, directives, keys that are not plain strings (null, booleans, numbers, collections).
 *   For those, and for every syntax error, the caller reads the file with `yaml` as before.
 *
 * A differential test (test/unit/config/fast-yaml.test.ts) holds the two to the same values.
 */

/**
 * The `yaml` package's YAML 1.2 core schema scalars, in its order: the tag tests and resolvers of
 * yaml/dist/schema/core (null, bool, int in octal, decimal and hex, float NaN/infinities,
 * exponential and plain), as resolved with its default options (no BigInt). Written out so that
 * the fast path does not load `yaml` at all; a test checks them against the package's own tags.
 */
export const YAML_CORE_SCALARS: readonly { test: RegExp; resolve: (source: string) => unknown }[] = [
  { test: /^(?:~|[Nn]ull|NULL)?$/, resolve: () => null },
  { test: /^(?:[Tt]rue|TRUE|[Ff]alse|FALSE)$/, resolve: (s) => s[0] === 't' || s[0] === 'T' },
  { test: /^0o[0-7]+$/, resolve: (s) => parseInt(s.substring(2), 8) },
  { test: /^[-+]?[0-9]+$/, resolve: (s) => parseInt(s, 10) },
  { test: /^0x[0-9a-fA-F]+$/, resolve: (s) => parseInt(s.substring(2), 16) },
  {
    test: /^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$/,
    resolve: (s) => (s.slice(-3).toLowerCase() === 'nan' ? NaN : s[0] === '-' ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY),
  },
  { test: /^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$/, resolve: (s) => parseFloat(s) },
  { test: /^[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)$/, resolve: (s) => parseFloat(s) },
];

const PLAIN = 1;
const NON_STRING_FIRST = /^[~nNtTfF0-9+\-.]/;
/** A plain scalar that `yaml` would not read as a string. */
const resolvesToNonString = (text: string) =>
  text === '' || (NON_STRING_FIRST.test(text) && YAML_CORE_SCALARS.some((t) => t.test.test(text)));
const coreScalar = defineScalarTag<unknown>('tag:dpctl.dev,2024:yaml-core', {
  implicit: true,
  implicitFirstChars: null,
  resolve(source) {
    for (const tag of YAML_CORE_SCALARS) if (tag.test.test(source)) return tag.resolve(source);
    return NOT_RESOLVED;
  },
  identify: () => false,
});
const SCHEMA = new Schema([strTag, seqTag, mapTag, coreScalar]);

/** Why a file is left to the full parser, or undefined when the events are in the common subset. */
function unsupported(events: Event[], text: string): string | undefined {
  // Per open collection: for a mapping, whether the next node is a key.
  const keyNext: boolean[] = [];
  for (const e of events) {
    if (e.type === EVENT_ID.DOCUMENT) {
      if (e.directives.length) return 'directive';
      continue;
    }
    if (e.type === EVENT_ID.POP) {
      keyNext.pop();
      continue;
    }
    if (e.type === EVENT_ID.ALIAS) return 'alias';
    if (e.anchorStart !== -1) return 'anchor';
    if (e.tagStart !== -1) return 'tag';
    const top = keyNext.length - 1;
    const isKey = top >= 0 && keyNext[top];
    if (top >= 0 && keyNext[top] !== undefined) keyNext[top] = !keyNext[top];
    if (isKey) {
      if (e.type !== EVENT_ID.SCALAR) return 'collection key';
      if ((e as ScalarEvent).style === PLAIN) {
        const key = e.valueStart === -1 ? '' : getScalarValue(text, e as ScalarEvent);
        if (key === '<<' || resolvesToNonString(key)) return 'non-string key';
      }
    }
    if (e.type === EVENT_ID.MAPPING) keyNext.push(true);
    else if (e.type === EVENT_ID.SEQUENCE) keyNext.push(undefined as unknown as boolean);
  }
  return undefined;
}

/**
 * The documents of a file as plain values (null for an empty document), in order, or undefined
 * when the file must be read with the `yaml` package (a syntax error, or a construct outside the
 * common subset).
 */
export function fastParseDocuments(text: string): unknown[] | undefined {
  let events: Event[];
  try {
    events = parseEvents(text, {});
  } catch {
    return undefined;
  }
  if (unsupported(events, text)) return undefined;
  try {
    return constructFromEvents(events, { source: text, schema: SCHEMA });
  } catch {
    return undefined;
  }
}
