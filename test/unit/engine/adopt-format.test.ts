import { describe, expect, it } from 'vitest';
import { adoptJson, renderAdopt, type AdoptResult } from '../../../src/engine/index.js';

const entry = {
  kind: 'classification',
  yamlKind: 'Classification',
  project: 'shop',
  name: 'handmade',
  status: 'adopted' as const,
  changes: [],
  detail: 'matches the config',
};

describe('adopt output', () => {
  const result: AdoptResult = { sourceId: 'platform', entries: [entry], errors: [], warnings: [] };

  it('of a real run says what was adopted', () => {
    const text = renderAdopt(result);
    expect(text).not.toMatch(/dry run/i);
    expect(text.trimEnd().split('\n').pop()).toBe(
      'Adopt: 1 adopted, 0 already owned, 0 matching without labels, 0 differ, 0 missing, 0 failed.',
    );
    expect(adoptJson(result).dry_run).toBe(false);
  });

  it('of a dry run cannot be mistaken for a real one (a user could not tell them apart)', () => {
    const text = renderAdopt({ ...result, dryRun: true });
    const lines = text.trimEnd().split('\n');
    expect(lines[0]).toBe('Dry run: nothing is labelled; "adopted" below means it would be.');
    expect(lines.pop()).toBe(
      'Adopt (dry run: nothing written): 1 would be adopted, 0 already owned, 0 matching without labels, 0 differ, 0 missing, 0 failed.',
    );
    expect(adoptJson({ ...result, dryRun: true }).dry_run).toBe(true);
  });
});
