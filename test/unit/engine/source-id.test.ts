import { describe, expect, it } from 'vitest';
import { sourceIdProblem } from '../../../src/engine/index.js';

describe('sourceIdProblem: a source id is a label value', () => {
  it('accepts what a label value may be, up to the schema’s 256 characters', () => {
    for (const id of ['platform', 'team-a/platform', 'Data Platform', 'x'.repeat(256)]) expect(sourceIdProblem(id)).toBeUndefined();
  });

  it('refuses an empty, padded, control-character or over-long id, saying why', () => {
    expect(sourceIdProblem('')).toBe('the source id is empty: pass --source-id <id>');
    expect(sourceIdProblem('   ')).toBe('the source id is empty: pass --source-id <id>');
    expect(sourceIdProblem('platform ')).toBe('the source id "platform " has spaces around it or control characters');
    expect(sourceIdProblem('plat\nform')).toBe('the source id "plat\\nform" has spaces around it or control characters');
    expect(sourceIdProblem('x'.repeat(257))).toBe('the source id is 257 characters long; a label value holds at most 256');
  });
});
