import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pluginCertificate } from './cert.js';
import { GrpcStatus, listenUnary, type UnaryHandler, type UnaryMethod } from './grpc-server.js';
import { loadDefinitions, type ServiceDefinition } from './proto.js';
import { readStaticResponses } from './static-responses.js';

type Handlers = Record<string, UnaryHandler>;

/** The largest request accepted (a resource's config or state, msgpack-encoded). */
const MAX_MESSAGE_BYTES = 256 << 20;

/**
 * Serves the provider as a go-plugin: mTLS gRPC on a unix socket, then the handshake line on
 * stdout (and nothing else there ever).
 */
export async function serveProvider(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  if (!env.TF_PLUGIN_MAGIC_COOKIE) {
    process.stderr.write(
      'This binary is a plugin for Terraform: it is not meant to be run directly. Install it with `dpctl provider install`.\n',
    );
    process.exit(1);
  }
  const clientCert = env.PLUGIN_CLIENT_CERT;
  if (!clientCert) throw new Error('PLUGIN_CLIENT_CERT is not set: this provider needs Terraform >= 0.15 (AutoMTLS)');
  const { certPem, keyPem, certDerB64 } = pluginCertificate();
  const dir = mkdtempSync(join(tmpdir(), 'tf-dataplatform-'));
  const socket = join(dir, 'plugin.sock');
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  const exit = () => {
    cleanup();
    process.exit(0);
  };
  const defs = loadDefinitions();
  // The implementation (client, kinds, validation: most of the bundle) is a chunk of its own,
  // loaded by the first RPC that needs it; the schema answers below do not. Terraform starts one
  // process per command only to read the schema and then shuts it down: loading the chunk there
  // "in advance" held its Shutdown answer (and the command) ~100 ms, while in the other processes
  // the first RPC that needs it follows the schema answer within a few milliseconds anyway.
  let implementation: Promise<Handlers> | undefined;
  const load = () => (implementation ??= import('./provider.js').then((m) => m.providerImplementation(() => undefined) as Handlers));
  const service = defs['tfplugin6.Provider'];
  const lazy: Handlers = Object.fromEntries(
    Object.keys(service).map((name): [string, UnaryHandler] => [
      name,
      (call, callback) =>
        void load().then(
          (h) => h[name](call, callback),
          (err: Error) => callback({ code: GrpcStatus.INTERNAL, details: err.message }),
        ),
    ]),
  );
  // The schema answers, already encoded by the build (see static-responses.ts).
  const canned = readStaticResponses();
  if ('unusable' in canned) process.stderr.write(`[dataplatform-provider] computing the schema at start-up: ${canned.unusable}\n`);
  else {
    for (const [name, bytes] of canned.responses) {
      lazy[name] = (_call, callback) => callback(null, bytes);
    }
  }
  const statsFile = env.DATAPLATFORM_PROVIDER_STATS;
  const methods = new Map([
    ...unaryMethods(service, statsFile ? recordStats(lazy, statsFile, () => implementation !== undefined) : lazy),
    ...unaryMethods(defs['plugin.GRPCController'], {
      Shutdown: (_call, callback) => {
        callback(null, {});
        setImmediate(exit);
      },
    }),
    ...unaryMethods(defs['grpc.health.v1.Health'], { Check: (_call, callback) => callback(null, { status: 1 }) }),
  ]);
  await listenUnary(socket, { cert: certPem, key: keyPem, clientCa: clientCert, methods, maxMessageBytes: MAX_MESSAGE_BYTES });
  process.on('SIGTERM', exit);
  process.on('SIGINT', () => undefined); // Terraform forwards Ctrl-C; it stops us through StopProvider/Shutdown.
  process.on('exit', cleanup);
  process.stdout.write(`1|6|unix|${socket}|grpc|${certDerB64}\n`);
}

/**
 * For benchmarks (bench/provider.ts): with DATAPLATFORM_PROVIDER_STATS naming a file, the process
 * counts and times its RPCs and, at exit, appends one JSON line to that file: its CPU time
 * (process.cpuUsage), its life, whether it loaded the implementation chunk, and per method the
 * calls and the time from request to answer. Without the variable nothing is wrapped or recorded.
 */
function recordStats(handlers: Handlers, file: string, implementationLoaded: () => boolean): Handlers {
  const rpcs: Record<string, { calls: number; ms: number }> = {};
  process.on('exit', () => {
    const cpu = process.cpuUsage();
    appendFileSync(
      file,
      `${JSON.stringify({ pid: process.pid, lifeMs: Math.round(process.uptime() * 1000), cpuMs: Math.round((cpu.user + cpu.system) / 1000), implementationLoaded: implementationLoaded(), rpcs })}\n`,
    );
  });
  return Object.fromEntries(
    Object.entries(handlers).map(([name, fn]) => [
      name,
      (call, callback) => {
        const t0 = performance.now();
        fn(call, (err, value) => {
          const r = (rpcs[name] ??= { calls: 0, ms: 0 });
          r.calls++;
          r.ms += performance.now() - t0;
          callback(err, value);
        });
      },
    ]),
  );
}

/** A service's methods by path, each with its handler (a handler may answer with bytes already encoded). */
function unaryMethods(service: ServiceDefinition, handlers: Handlers): [string, UnaryMethod][] {
  return Object.entries(handlers).map(([name, handler]) => {
    const method = service[name];
    return [method.path, { decode: method.requestDeserialize, encode: method.responseSerialize, handler }];
  });
}
