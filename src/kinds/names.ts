/**
 * What a resource name may not contain, whatever else its schema allows. Names reach
 * terminals, logs, plan output, HTML (docs, SSO choice) and other tenants' admins, so:
 * - control characters (C0, DEL, C1) rewrite terminals and split log lines;
 * - bidirectional controls (embeddings and overrides U+202A-U+202E, isolates U+2066-U+2069,
 *   and the invisible marks U+200E, U+200F, U+061C) make a name read differently from its
 *   bytes ("Trojan Source"), so two names that look the same can differ;
 * - line and paragraph separators (U+2028, U+2029) break lines like a newline;
 * - a lone surrogate is not text at all: it cannot be encoded as UTF-8 and becomes U+FFFD on
 *   the way to the store or a client, so the name read back is not the name written.
 * Letters of every script, emoji and joiners (ZWJ/ZWNJ, needed by some scripts) stay allowed.
 */
const CLASSES: { re: RegExp; what: string }[] = [
  // eslint-disable-next-line no-control-regex -- finding control characters is the point
  { re: /[\u0000-\u001f\u007f-\u009f]/u, what: 'a control character' },
  { re: /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u, what: 'a bidirectional control character' },
  { re: /[\u2028\u2029]/u, what: 'a line or paragraph separator' },
  // In a `u` regular expression a paired surrogate is one code point, so only lone halves match.
  { re: /[\ud800-\udfff]/u, what: 'a lone surrogate (not valid Unicode)' },
];

/**
 * Why `value` is not an acceptable name, or null. A blank name, or one with a space at either end
 * ("orders " beside "orders"), reads as another name or as none in every listing, plan and log.
 */
export function nameError(value: string): string | null {
  for (const { re, what } of CLASSES) {
    const m = re.exec(value);
    if (m) return `must not contain ${what} (U+${m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')} at position ${m.index})`;
  }
  const trimmed = value.trim();
  if (trimmed === '' && value !== '') return 'must not be blank';
  if (trimmed !== value) return 'must not start or end with whitespace';
  return null;
}
