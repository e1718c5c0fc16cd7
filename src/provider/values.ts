import { decode, encode, ExtData, ExtensionCodec } from '@msgpack/msgpack';

/** A value Terraform does not know yet (msgpack extension 0, or 12 with refinements). */
export const UNKNOWN: unique symbol = Symbol('unknown');
export type Unknown = typeof UNKNOWN;

export type TfValue = null | string | number | boolean | Unknown | TfValue[] | { [key: string]: TfValue };
export type TfObject = { [key: string]: TfValue };

const codec = new ExtensionCodec();
// Any extension type decodes as unknown; we always answer with type 0 (cty's `d4 00 00`).
for (let type = 0; type <= 127; type++) {
  codec.register({
    type,
    encode: () => null,
    decode: () => UNKNOWN,
  });
}

export interface DynamicValue {
  msgpack?: Buffer | Uint8Array;
  json?: Buffer | Uint8Array;
}

export function decodeDynamic(value: DynamicValue | null | undefined): TfValue {
  if (!value) return null;
  if (value.msgpack && value.msgpack.length) return decode(value.msgpack, { extensionCodec: codec, useBigInt64: false }) as TfValue;
  if (value.json && value.json.length) return JSON.parse(Buffer.from(value.json).toString('utf8')) as TfValue;
  return null;
}

function toEncodable(value: TfValue): unknown {
  if (value === UNKNOWN) return new ExtData(0, new Uint8Array([0]));
  if (Array.isArray(value)) return value.map(toEncodable);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = toEncodable(v);
    return out;
  }
  return value;
}

export function encodeDynamic(value: TfValue): { msgpack: Buffer } {
  return { msgpack: Buffer.from(encode(toEncodable(value), { ignoreUndefined: false, forceFloat32: false })) };
}

export const isUnknown = (v: unknown): v is Unknown => v === UNKNOWN;
export const isTfObject = (v: unknown): v is TfObject => v !== null && typeof v === 'object' && !Array.isArray(v);

/** True when the value holds an unknown anywhere. */
export function hasUnknown(v: TfValue): boolean {
  if (v === UNKNOWN) return true;
  if (Array.isArray(v)) return v.some(hasUnknown);
  if (isTfObject(v)) return Object.values(v).some(hasUnknown);
  return false;
}

/** Exact equality of two Terraform values (unknown equals only unknown). */
export function tfEqual(a: TfValue, b: TfValue): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => tfEqual(x, b[i]));
  }
  if (isTfObject(a) && isTfObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) if (!tfEqual(a[k] ?? null, b[k] ?? null)) return false;
    return true;
  }
  return false;
}

/**
 * Paths where `planned` holds a known value that `actual` does not repeat exactly: what
 * Terraform would call "Provider produced inconsistent result after apply".
 */
export function inconsistencies(planned: TfValue, actual: TfValue, path: string[] = [], out: string[] = []): string[] {
  if (planned === UNKNOWN) {
    if (hasUnknown(actual)) out.push(`${path.join('.') || '(root)'}: still unknown after apply`);
    return out;
  }
  if (Array.isArray(planned)) {
    if (!Array.isArray(actual) || actual.length !== planned.length) out.push(`${path.join('.')}: planned ${planned.length} elements`);
    else planned.forEach((p, i) => inconsistencies(p, actual[i], [...path, String(i)], out));
    return out;
  }
  if (isTfObject(planned)) {
    if (!isTfObject(actual)) out.push(`${path.join('.')}: planned an object, got ${actual === null ? 'null' : typeof actual}`);
    else for (const k of Object.keys(planned)) inconsistencies(planned[k], actual[k] ?? null, [...path, k], out);
    return out;
  }
  if (planned !== actual) out.push(`${path.join('.')}: the API answered a different value than planned`);
  return out;
}
