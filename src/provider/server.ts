import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { pluginCertificate } from './cert.js';
import { loadDefinitions } from './proto.js';
import { readStaticResponses } from './static-responses.js';

// Messages are plain objects decoded by @grpc/proto-loader from the protocol's .proto files.
/* eslint-disable @typescript-eslint/no-explicit-any */
type Call = grpc.ServerUnaryCall<any, any>;
type Callback = grpc.sendUnaryData<any>;
/* eslint-enable @typescript-eslint/no-explicit-any */
type Handlers = Record<string, (call: Call, callback: Callback) => void>;

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
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 256 << 20, 'grpc.max_send_message_length': 256 << 20 });
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  const exit = () => {
    server.forceShutdown();
    cleanup();
    process.exit(0);
  };
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- service constructors are looked up by name
  const defs = grpc.loadPackageDefinition(loadDefinitions()) as any;
  // The implementation (client, kinds, validation: most of the bundle) is a chunk of its own.
  // Each RPC that needs it waits for it; it starts loading once the first answer is out, so the
  // schema answer below, which does not need it, is never delayed by its compilation.
  let implementation: Promise<Handlers> | undefined;
  const load = () => (implementation ??= import('./provider.js').then((m) => m.providerImplementation(() => undefined) as Handlers));
  const preload = () =>
    setImmediate(
      () => void load().catch((err: Error) => process.stderr.write(`[dataplatform-provider] cannot load: ${err.stack ?? err.message}\n`)),
    );
  const service = defs.tfplugin6.Provider.service as grpc.ServiceDefinition;
  const lazy: Handlers = Object.fromEntries(
    Object.keys(service).map((name) => [
      name,
      (call: Call, callback: Callback) =>
        void load().then(
          (h) => h[name](call, callback),
          (err: Error) => callback({ code: grpc.status.INTERNAL, details: err.message }),
        ),
    ]),
  );
  // The schema answers, already encoded by the build (see static-responses.ts).
  const canned = readStaticResponses();
  if ('unusable' in canned) process.stderr.write(`[dataplatform-provider] computing the schema at start-up: ${canned.unusable}\n`);
  else {
    for (const [name, bytes] of canned.responses) {
      lazy[name] = (_call: Call, callback: Callback) => {
        callback(null, bytes);
        preload();
      };
    }
  }
  const statsFile = env.DATAPLATFORM_PROVIDER_STATS;
  server.addService(passEncodedAnswers(service), statsFile ? recordStats(lazy, statsFile) : lazy);
  server.addService(defs.plugin.GRPCController.service, {
    Shutdown: (_call: Call, callback: Callback) => {
      callback(null, {});
      setImmediate(exit);
    },
  });
  server.addService(defs.grpc.health.v1.Health.service, { Check: (_call: Call, callback: Callback) => callback(null, { status: 1 }) });
  const creds = grpc.ServerCredentials.createSsl(
    Buffer.from(clientCert),
    [{ private_key: Buffer.from(keyPem), cert_chain: Buffer.from(certPem) }],
    true,
  );
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socket}`, creds, (err) => (err ? reject(err) : resolve())));
  process.on('SIGTERM', exit);
  process.on('SIGINT', () => undefined); // Terraform forwards Ctrl-C; it stops us through StopProvider/Shutdown.
  process.on('exit', cleanup);
  process.stdout.write(`1|6|unix|${socket}|grpc|${certDerB64}\n`);
}

/**
 * For benchmarks (bench/provider.ts): with DATAPLATFORM_PROVIDER_STATS naming a file, the process
 * counts and times its RPCs and, at exit, appends one JSON line to that file: its CPU time
 * (process.cpuUsage), its life, and per method the calls and the time from request to answer.
 * Without the variable nothing is wrapped or recorded.
 */
function recordStats(handlers: Handlers, file: string): Handlers {
  const rpcs: Record<string, { calls: number; ms: number }> = {};
  process.on('exit', () => {
    const cpu = process.cpuUsage();
    appendFileSync(
      file,
      `${JSON.stringify({ pid: process.pid, lifeMs: Math.round(process.uptime() * 1000), cpuMs: Math.round((cpu.user + cpu.system) / 1000), rpcs })}\n`,
    );
  });
  return Object.fromEntries(
    Object.entries(handlers).map(([name, fn]) => [
      name,
      (call: Call, callback: Callback) => {
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

/** The service, with answers given as Buffers sent as they are (already encoded). */
function passEncodedAnswers(service: grpc.ServiceDefinition): grpc.ServiceDefinition {
  return Object.fromEntries(
    Object.entries(service).map(([name, method]) => [
      name,
      { ...method, responseSerialize: (value: unknown) => (Buffer.isBuffer(value) ? value : method.responseSerialize(value)) },
    ]),
  ) as grpc.ServiceDefinition;
}
