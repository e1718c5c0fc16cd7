/** Small formatting helpers of the status page: escaping, human times, durations, values. */

/** Escapes text for HTML content and quoted attribute values. Everything from config, API or git goes through it. */
export const esc = (s: unknown): string =>
  String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/**
 * "12 s ago", "3 min ago", "2 h ago", "4 d ago"; "in 20 s" for a time to come. The page's script
 * (status-page.ts) words them the same way when it updates them.
 */
export function relativeTime(ms: number, now: number): string {
  const d = Math.round((now - ms) / 1000);
  const a = Math.abs(d);
  const text =
    a < 60 ? `${a} s` : a < 3600 ? `${Math.floor(a / 60)} min` : a < 86400 ? `${Math.floor(a / 3600)} h` : `${Math.floor(a / 86400)} d`;
  return d >= 0 ? `${text} ago` : `in ${text}`;
}

/** A human time with the exact ISO time on hover; `data-rel` marks it for the script to keep current. */
export function timeTag(iso: string | null | undefined, now: number): string {
  if (!iso) return '<em>never</em>';
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return esc(iso);
  return `<time datetime="${esc(iso)}" title="${esc(iso)}" data-rel>${esc(relativeTime(ms, now))}</time>`;
}

/** "850 ms", "12.3 s", "4 min 5 s". */
export function durationText(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '-';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** A revision as people read it: 12 characters of a commit, `sha256:` and 12 of a directory's hash. */
export const shortRevision = (id: string): string => (id.startsWith('sha256:') ? id.slice(0, 19) : id.slice(0, 12));

/** Longest value shown in a drift diff; the JSON has it whole. */
const MAX_VALUE = 2_000;

/** A field's value in a drift diff: JSON (strings quoted), "(absent)" for none, cut when long. */
export function valueText(v: unknown): string {
  if (v === null || v === undefined) return '(absent)';
  if (v === '(sensitive)') return v;
  let text: string;
  try {
    text = JSON.stringify(v, null, typeof v === 'object' ? 1 : undefined) ?? String(v);
  } catch {
    text = String(v);
  }
  return text.length > MAX_VALUE ? `${text.slice(0, MAX_VALUE)}… (${text.length - MAX_VALUE} more characters in /status)` : text;
}

/** `n thing` / `n things`. */
export const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;
