import { diagnose } from '../diagnostics.js';
import type { UnaryHandler } from '../grpc-server.js';

export const log = (msg: string) => process.stderr.write(`[dataplatform-provider] ${msg}\n`);

/** Wraps a handler: exceptions become error diagnostics in the field the response uses. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function unary(name: string, fn: (req: any) => Promise<object> | object): UnaryHandler {
  return (call, callback) => {
    Promise.resolve()
      .then(() => fn(call.request))
      .then(
        (res) => callback(null, res),
        (err) => {
          // The code (ours, or the API's) leads the log line, so TF_LOG output can be grepped by kind of failure.
          const code = (err as { code?: unknown })?.code;
          log(`${name} failed${typeof code === 'string' ? ` [${code}]` : ''}: ${err instanceof Error ? err.message : String(err)}`);
          callback(null, { diagnostics: [diagnose(err)] });
        },
      );
  };
}
