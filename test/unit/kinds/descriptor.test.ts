import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { KINDS, SCHEMAS_DIR, SCOPE_CONTAINER } from '../../../src/kinds/index.js';
import { describeKind } from '../../../src/kinds/descriptor.js';

describe('x-scope-container: the kind whose resources are the projects', () => {
  it('is the project kind, and no other', () => {
    expect(SCOPE_CONTAINER.kind).toBe('project');
    expect([...KINDS.values()].filter((k) => k.scopeContainer).map((k) => k.kind)).toEqual(['project']);
  });

  it('comes from the schema keyword, not from the name', () => {
    const file = JSON.parse(readFileSync(join(SCHEMAS_DIR, 'kinds', 'project.schema.json'), 'utf8'));
    expect(describeKind(file).scopeContainer).toBe(true);
    delete file['x-scope-container'];
    expect(describeKind(file).scopeContainer).toBe(false);
  });
});
