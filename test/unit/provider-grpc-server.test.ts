import { mkdtempSync, rmSync } from 'node:fs';
import type { Http2SecureServer } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pluginCertificate } from '../../src/provider/cert.js';
import { GrpcStatus, listenUnary, type UnaryHandler, type UnaryMethod } from '../../src/provider/grpc-server.js';
import { loadDefinitions } from '../../src/provider/proto.js';

/**
 * The provider's own unary gRPC server (src/provider/grpc-server.ts) against an independent
 * client, @grpc/grpc-js, over mTLS on a Unix socket as go-plugin connects. Terraform's grpc-go
 * talks to it in every e2e test.
 */
const defs = loadDefinitions();
const clients = grpc.loadPackageDefinition(defs) as any;
const dir = mkdtempSync(join(tmpdir(), 'dp-grpc-server-'));
const socket = join(dir, 'plugin.sock');
const serverCert = pluginCertificate();
const clientCert = pluginCertificate();
const MAX = 64 * 1024 * 1024;
let server: Http2SecureServer;
const sessions = new Set<{ destroy(): void }>();

/** The health service (unary, one string in) stands in for any method: its request picks the answer. */
const check: UnaryHandler<{ service: string }> = ({ request }, callback) => {
  const service = request.service;
  if (service === 'fail') return callback({ code: GrpcStatus.INVALID_ARGUMENT, details: 'bad 100% • "ça" \n line' });
  if (service === 'bytes') return callback(null, defs['grpc.health.v1.Health'].Check.responseSerialize({ status: 2 }));
  if (service === 'throw-encode') return callback(null, { status: 99 });
  if (service.startsWith('big')) return callback(null, withUnknownField({ status: 1 }, Number(service.slice(3))));
  if (service.startsWith('slow')) return void setTimeout(() => callback(null, { status: 1 }), 20);
  callback(null, { status: 1 });
};

/** A response of `size` bytes more: an unknown length-delimited field (number 15), which decoders skip. */
function withUnknownField(value: object, size: number): Buffer {
  const varint: number[] = [];
  for (let v = size; ; v = Math.floor(v / 128)) {
    if (v < 128) {
      varint.push(v);
      break;
    }
    varint.push((v % 128) | 128);
  }
  const encoded = defs['grpc.health.v1.Health'].Check.responseSerialize(value);
  return Buffer.concat([encoded, Buffer.from([(15 << 3) | 2, ...varint]), Buffer.alloc(size, 0x79)]);
}

function methodsOf(service: string, handlers: Record<string, UnaryHandler>): [string, UnaryMethod][] {
  return Object.entries(handlers).map(([name, handler]) => {
    const m = defs[service][name];
    const encode = (value: object) => {
      if ((value as { status?: number }).status === 99) throw new Error('no such status');
      return m.responseSerialize(value);
    };
    return [m.path, { decode: m.requestDeserialize, encode, handler }];
  });
}

function client(cert = clientCert) {
  return new clients.grpc.health.v1.Health(
    `unix:${socket}`,
    grpc.credentials.createSsl(Buffer.from(serverCert.certPem), Buffer.from(cert.keyPem), Buffer.from(cert.certPem)),
    // The answer size limit is the client's (grpc-js's default is 4 MB): lifted to test the server's side.
    { 'grpc.ssl_target_name_override': 'localhost', 'grpc.default_authority': 'localhost', 'grpc.max_receive_message_length': 64 << 20 },
  );
}

function call(stub: any, service: string): Promise<{ err: grpc.ServiceError | null; res?: { status: number } }> {
  return new Promise((resolve) =>
    stub.Check({ service }, (err: grpc.ServiceError | null, res?: { status: number }) => resolve({ err, res })),
  );
}

beforeAll(async () => {
  server = await listenUnary(socket, {
    cert: serverCert.certPem,
    key: serverCert.keyPem,
    clientCa: clientCert.certPem,
    methods: new Map(methodsOf('grpc.health.v1.Health', { Check: check as UnaryHandler })),
    maxMessageBytes: MAX,
  });
  server.on('session', (session) => sessions.add(session));
});
afterAll(async () => {
  // close() waits for the clients' connections, which grpc-js keeps open a while after close().
  for (const session of sessions) session.destroy();
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

describe('the provider gRPC server', () => {
  it('answers a unary call with the handler’s response, encoded or given as bytes', async () => {
    const stub = client();
    expect(await call(stub, 'plugin')).toEqual({ err: null, res: { status: 1 } });
    expect(await call(stub, 'bytes')).toEqual({ err: null, res: { status: 2 } });
    stub.close();
  });

  it('answers many concurrent calls on one connection, each with its own answer', async () => {
    const stub = client();
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => call(stub, i % 2 ? 'slow' : 'bytes')));
    expect(answers.map((a) => a.res?.status)).toEqual(Array.from({ length: 50 }, (_, i) => (i % 2 ? 1 : 2)));
    stub.close();
  });

  it('drops the answer of a call its client gave up on, and goes on serving', async () => {
    const stub = client();
    const err = await new Promise<grpc.ServiceError>((resolve) =>
      stub.Check({ service: 'slow' }, { deadline: Date.now() + 5 }, (e: grpc.ServiceError) => resolve(e)),
    );
    expect(err.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    await new Promise((resolve) => setTimeout(resolve, 40)); // the handler answers meanwhile
    expect(await call(stub, 'plugin')).toEqual({ err: null, res: { status: 1 } });
    stub.close();
  });

  it('sends a handler’s error as its status and message, percent-encoded on the wire', async () => {
    const stub = client();
    const { err } = await call(stub, 'fail');
    expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err?.details).toBe('bad 100% • "ça" \n line');
    stub.close();
  });

  it('answers INTERNAL when a response cannot be encoded', async () => {
    const stub = client();
    const { err } = await call(stub, 'throw-encode');
    expect(err?.code).toBe(grpc.status.INTERNAL);
    expect(err?.details).toMatch(/cannot encode the response/);
    stub.close();
  });

  it('answers UNIMPLEMENTED for a method it does not serve', async () => {
    const Provider = clients.tfplugin6.Provider;
    const stub = new Provider(
      `unix:${socket}`,
      grpc.credentials.createSsl(Buffer.from(serverCert.certPem), Buffer.from(clientCert.keyPem), Buffer.from(clientCert.certPem)),
      { 'grpc.ssl_target_name_override': 'localhost', 'grpc.default_authority': 'localhost' },
    );
    const err = await new Promise<grpc.ServiceError>((resolve) => stub.GetMetadata({}, (e: grpc.ServiceError) => resolve(e)));
    expect(err.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(err.details).toContain('/tfplugin6.Provider/GetMetadata');
    stub.close();
  });

  it('carries requests and answers of tens of megabytes (a large state), and serves others meanwhile', async () => {
    const stub = client();
    const size = 24 * 1024 * 1024;
    const [big, small] = await Promise.all([call(stub, `big${size}`), call(stub, 'plugin')]);
    expect(big.err).toBeNull();
    expect(small).toEqual({ err: null, res: { status: 1 } });
    const request = await call(stub, 'x'.repeat(size));
    expect(request).toEqual({ err: null, res: { status: 1 } });
    stub.close();
  });

  it(`refuses a request larger than its limit with RESOURCE_EXHAUSTED, and goes on serving`, async () => {
    const stub = client();
    const { err } = await call(stub, 'x'.repeat(MAX + 1));
    expect(err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(await call(stub, 'plugin')).toEqual({ err: null, res: { status: 1 } });
    stub.close();
  });

  it('refuses compressed requests with UNIMPLEMENTED (Terraform never compresses)', async () => {
    const stub = new clients.grpc.health.v1.Health(
      `unix:${socket}`,
      grpc.credentials.createSsl(Buffer.from(serverCert.certPem), Buffer.from(clientCert.keyPem), Buffer.from(clientCert.certPem)),
      {
        'grpc.ssl_target_name_override': 'localhost',
        'grpc.default_authority': 'localhost',
        'grpc.default_compression_algorithm': 2, // gzip
      },
    );
    const { err } = await call(stub, 'plugin');
    expect(err?.code).toBe(grpc.status.UNIMPLEMENTED);
    stub.close();
  });

  it('refuses a client whose certificate is not the pinned one', async () => {
    const stub = client(pluginCertificate());
    const { err } = await call(stub, 'plugin');
    expect(err?.code).toBe(grpc.status.UNAVAILABLE);
    stub.close();
    // The pinned client still gets through afterwards.
    const ok = client();
    expect(await call(ok, 'plugin')).toEqual({ err: null, res: { status: 1 } });
    ok.close();
  });
});
