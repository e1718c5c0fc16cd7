/** Strings longer than this are not shared (descriptions, long texts: rarely repeated). */
const SHARE_MAX_LENGTH = 64;

/**
 * V8 makes a substring of 13 characters or more a slice of the string it was taken from, which
 * keeps all of that string alive: js-yaml's plain scalars are slices of the file's text.
 */
const SLICE_MIN_LENGTH = 13;

/** The same characters in a string of their own (JSON.parse copies; slice() and friends may not). */
const flatCopy = (s: string): string => JSON.parse(JSON.stringify(s)) as string;

/**
 * Makes equal strings in `value` (objects and arrays, recursively) one string, the first seen in
 * `table`: parsers give each occurrence its own, and at 100,000 resources the names, hosts,
 * tables, schedules, project names and ids repeated across documents or listed objects are
 * ~0.2 KB per resource each side. Values under `id` and `*_at` keys (unique per resource, as the
 * API returns them) and long strings are left alone. Only which string object holds a value
 * changes, never a value. `flatten`: the strings kept (each first one, and long ones) are copies
 * of their own, so that none of them keeps the text it was parsed from alive.
 */
export function shareStrings(value: Record<string, unknown> | unknown[], table: Map<string, string>, flatten = false): void {
  const isArray = Array.isArray(value);
  for (const k in value) {
    const v = (value as Record<string, unknown>)[k];
    if (typeof v === 'string') {
      if (v.length > SHARE_MAX_LENGTH || (!isArray && (k === 'id' || k.endsWith('_at')))) {
        if (flatten && v.length >= SLICE_MIN_LENGTH) (value as Record<string, unknown>)[k] = flatCopy(v);
        continue;
      }
      const shared = table.get(v);
      // (=== compares contents: an equal string found is written back, the first one seen.)
      if (shared === undefined)
        table.set(v, flatten && v.length >= SLICE_MIN_LENGTH ? ((value as Record<string, unknown>)[k] = flatCopy(v)) : v);
      else (value as Record<string, unknown>)[k] = shared;
    } else if (v !== null && typeof v === 'object') {
      shareStrings(v as Record<string, unknown>, table, flatten);
    }
  }
}
