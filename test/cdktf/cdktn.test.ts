import { describe, expect, it, vi } from 'vitest';
import { testOutdir } from '../support/cdktf-outdir.js';

const outdir = testOutdir();

/**
 * The switch to cdktn (the community continuation of CDK for Terraform) is one line in
 * src/cdktf/cdk.ts. Here that line is switched by mocking 'cdktf' with 'cdktn' for a fresh
 * module graph, and the example app must synthesize to the same JSON with both.
 */
async function synthExampleWith(library: 'cdktf' | 'cdktn') {
  vi.resetModules();
  if (library === 'cdktn') vi.doMock('cdktf', async () => await vi.importActual('cdktn'));
  else vi.doUnmock('cdktf');
  const cdk = await import('../../src/cdktf/cdk.js');
  const real = (await vi.importActual(library)) as typeof cdk;
  const { PlatformStack } = await import('../../examples/cdktf/platform-stack.js');
  const stack = new PlatformStack(cdk.Testing.app({ outdir }), 'platform');
  return {
    usedLibrary: cdk.TerraformStack === real.TerraformStack,
    stackClass: cdk.TerraformStack,
    json: JSON.parse(cdk.Testing.synth(stack)),
  };
}

describe('cdktn instead of cdktf', () => {
  it('synthesizes the example app to the same JSON', async () => {
    const withCdktf = await synthExampleWith('cdktf');
    const withCdktn = await synthExampleWith('cdktn');
    // Each run really went through the library it names (not the same module twice).
    expect(withCdktf.usedLibrary).toBe(true);
    expect(withCdktn.usedLibrary).toBe(true);
    expect(withCdktn.stackClass).not.toBe(withCdktf.stackClass);
    expect(Object.keys(withCdktf.json.resource)).toHaveLength(9);
    expect(withCdktn.json).toEqual(withCdktf.json);
  });
});
