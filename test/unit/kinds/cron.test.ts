import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { cronError, latestTickAt, nextCronTime, nextTickAfter, normalizeCron } from '../../../src/kinds/cron.js';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();

describe('cron expressions (UTC)', () => {
  it('accepts five-field expressions and says what is wrong with the others', () => {
    expect(cronError('*/15 * * * *')).toBeNull();
    expect(cronError('  0   2 * * 1-5 ')).toBeNull();
    expect(cronError('0 0 29 2 *')).toBeNull();
    expect(cronError('0 2 * *')).toMatch(/five-field.*got 4 field/);
    expect(cronError('61 * * * *')).toMatch(/^is not a valid cron expression: /);
    expect(normalizeCron('  0   2 * * 1-5 ')).toBe('0 2 * * 1-5');
  });

  it('finds the next tick strictly after an instant and the latest at or before it', () => {
    expect(iso(nextTickAfter('*/15 * * * *', at('2026-11-26T12:14:59.999Z')))).toBe('2026-11-26T12:15:00.000Z');
    expect(iso(nextTickAfter('*/15 * * * *', at('2026-11-26T12:15:00.000Z')))).toBe('2026-11-26T12:30:00.000Z');
    expect(iso(nextTickAfter('0 0 1 1 *', at('2026-11-26T12:00:00Z')))).toBe('2027-01-01T00:00:00.000Z');
    expect(iso(nextTickAfter('0 0 29 2 *', at('2026-11-26T12:00:00Z')))).toBe('2028-02-29T00:00:00.000Z');
    expect(iso(latestTickAt('0 * * * *', at('2026-11-26T12:00:00.000Z')))).toBe('2026-11-26T12:00:00.000Z');
    expect(iso(latestTickAt('0 * * * *', at('2026-11-26T12:59:59Z')))).toBe('2026-11-26T12:00:00.000Z');
    expect(nextCronTime('30 4 * * *', new Date('2026-11-26T04:30:00Z')).toISOString()).toBe('2026-11-27T04:30:00.000Z');
  });

  it("leaves luxon's default locale as the embedding application set it (both of luxon's builds)", async () => {
    const { Settings: esm } = await import('luxon');
    expect(esm.defaultLocale).toBeFalsy();
    const Settings = createRequire(import.meta.url)('luxon').Settings as typeof esm;
    const prior = Settings.defaultLocale;
    Settings.defaultLocale = 'fr-FR';
    try {
      expect(cronError('5 4 * * *')).toBeNull();
      nextTickAfter('7 4 * * *', Date.now());
      expect(Settings.defaultLocale).toBe('fr-FR');
    } finally {
      Settings.defaultLocale = prior;
    }
  });

  it('asks ICU for no locale: in a fresh process, parsing and computing ticks never call Intl.DateTimeFormat', () => {
    const script = [
      'let made = 0;',
      'const Real = Intl.DateTimeFormat;',
      'Intl.DateTimeFormat = function (...args) { made++; return new Real(...args); };',
      "import('./src/kinds/cron.ts').then((c) => {",
      "  if (c.cronError('*/15 * * * *') !== null) throw new Error('rejected');",
      "  c.nextTickAfter('0 0 1 1 *', Date.parse('2026-11-26T00:00:00Z'));",
      '  console.log(made);',
      '});',
    ].join('\n');
    const out = execFileSync(process.execPath, ['--import', 'tsx', '-e', script], { encoding: 'utf8' }).trim();
    expect(Number(out)).toBe(0);
  });
});
