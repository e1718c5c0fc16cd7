import { fullFormats } from 'ajv-formats/dist/formats.js';
import { isTimestamp } from './timestamps.js';

/**
 * The formats our schemas are checked with: ajv-formats' full set, with a stricter date-time (no
 * leap seconds or years the store cannot order, see timestamps.ts). One importable object, so the
 * validators generated at build time (ajv standalone code) use exactly what createAjv registers.
 */
export const formats = {
  ...fullFormats,
  'date-time': { type: 'string' as const, validate: isTimestamp },
};
