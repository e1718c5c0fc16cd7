import type * as grpc from '@grpc/grpc-js';
import { diagnose } from '../diagnostics.js';

export const log = (msg: string) => process.stderr.write(`[dataplatform-provider] ${msg}\n`);

// Messages are plain objects decoded by @grpc/proto-loader from the protocol's .proto files.
/* eslint-disable @typescript-eslint/no-explicit-any */
type Call = grpc.ServerUnaryCall<any, any>;
type Callback = grpc.sendUnaryData<any>;
/* eslint-enable @typescript-eslint/no-explicit-any */

/** Wraps a handler: exceptions become error diagnostics in the field the response uses. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function unary(name: string, fn: (req: any) => Promise<object> | object) {
  return (call: Call, callback: Callback) => {
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
