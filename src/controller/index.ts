/** `dpctl controller`: the continuous reconciler, as a library (startController) and a command (cli.ts). */
export { startController, type ControllerOptions, type RunningController } from './controller.js';
export { GitSource, type GitSourceOptions } from './source/git.js';
export { DirectorySource } from './source/directory.js';
export { redactUrl, type ConfigSource, type Revision } from './source/types.js';
export { signBody, verifySignature } from './source/webhook.js';
export { parseDuration } from './duration.js';
export { parseListen } from './server.js';
export type { ControllerStatus, ResourceStatus, ResourceState, RunResult } from './status.js';
