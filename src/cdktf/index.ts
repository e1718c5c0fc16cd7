/**
 * The construct library for CDK for Terraform: generated bindings of the dataplatform provider
 * (./generated), hand-written helpers above them (./helpers) and the YAML bridge (./yaml).
 * Every cdktf import goes through ./cdk.ts.
 */
export * from './generated/index.js';
export * from './helpers/platform.js';
export * from './helpers/pipeline.js';
export * from './helpers/secrets.js';
export * from './yaml.js';
export { formatConfigError, ConfigValidationError } from '../config/index.js';
