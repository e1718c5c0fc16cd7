import { describe, expect, it } from 'vitest';
import { dataSourceSpecs, resourceSpecs, type AttrSpec } from '../../src/provider/schema.js';

// Terraform shows descriptions in `terraform providers schema -json`, editors and generated
// docs; they come from schemas/kinds, so a field added there without one fails here.
function undescribed(attrs: AttrSpec[], prefix = ''): string[] {
  return attrs.flatMap((a) => [
    ...(a.description.trim() ? [] : [`${prefix}${a.name}`]),
    ...(a.attrs ? undescribed(a.attrs, `${prefix}${a.name}.`) : []),
  ]);
}

describe('provider schema descriptions', () => {
  const specs = [...resourceSpecs().values(), ...dataSourceSpecs().values()];

  it('covers every resource and data source', () => {
    expect(resourceSpecs().size).toBeGreaterThanOrEqual(12);
    expect(dataSourceSpecs().size).toBeGreaterThanOrEqual(15);
  });

  it.each(specs.map((s) => [s.typeName, s] as const))(
    '%s: the block and every attribute, nested ones too, are described',
    (_name, spec) => {
      expect(spec.descriptor.description || spec.descriptor.title).toBeTruthy();
      expect(undescribed(spec.attrs)).toEqual([]);
    },
  );
});
