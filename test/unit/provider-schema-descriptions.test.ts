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

  it("a data source says nothing about replacing, and has no attribute the API shows only at creation (an API key's key)", () => {
    const described = (attrs: AttrSpec[]): string[] => attrs.flatMap((a) => [a.description, ...(a.attrs ? described(a.attrs) : [])]);
    for (const spec of dataSourceSpecs().values())
      expect(
        described(spec.attrs).filter((d) => /replaces/.test(d)),
        spec.typeName,
      ).toEqual([]);
    expect(
      dataSourceSpecs()
        .get('dataplatform_api_key')!
        .attrs.map((a) => a.name),
    ).not.toContain('key');
    // The resource keeps both.
    const key = resourceSpecs().get('dataplatform_api_key')!.attrs;
    expect(key.map((a) => a.name)).toContain('key');
    expect(key.find((a) => a.name === 'name')!.description).toMatch(/Changing it replaces the key/);
  });
});
