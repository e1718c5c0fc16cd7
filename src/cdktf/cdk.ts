/**
 * The one module of the construct library that imports the CDK for Terraform packages.
 *
 * HashiCorp archived CDK for Terraform (`cdktf`) in December 2025; the community continues it
 * as `cdktn` with the same API. Every other file of src/cdktf imports from here, so switching is
 * this one line: `export * from 'cdktn';` (test/cdktf/cdktn.test.ts synthesizes the example app
 * with both and compares the JSON).
 */
export * from 'cdktf';
export { Construct } from 'constructs';
