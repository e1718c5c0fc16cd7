import { createSecureServer, constants, type Http2SecureServer, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';

/**
 * A gRPC server for unary calls only, on node:http2: all a go-plugin provider serves (every
 * method of tfplugin6 we implement, go-plugin's controller and the health check is unary).
 *
 * Why not @grpc/grpc-js: Terraform starts the provider 3-4 times per command and waits for each
 * handshake. grpc-js is 570 KB of bundled code (client, channels, resolvers, load balancers) whose
 * compilation and loading cost ~75 ms of every start, for a server that needs none of it.
 * grpc-js still talks to this server in the tests (test/unit/provider-grpc-server.test.ts), and
 * Terraform's grpc-go in every e2e test.
 *
 * The wire format (gRPC over HTTP/2): a request is POST /<package.Service>/<Method> whose body is one
 * length-prefixed message (1 byte "compressed" flag, 4 bytes big-endian length, the bytes); the
 * answer is HEADERS (:status 200, content-type application/grpc), one length-prefixed message,
 * then trailers carrying grpc-status (0 = OK) and grpc-message. A failure before any message is a
 * "trailers-only" answer: one HEADERS frame with the status and END_STREAM.
 */

/** gRPC status codes used here (grpc/doc/statuscodes.md). */
export const GrpcStatus = {
  OK: 0,
  INVALID_ARGUMENT: 3,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
} as const;

export interface GrpcError {
  code: number;
  details: string;
}

/** A unary call as handlers see it: the decoded request. */
export interface UnaryCall<Req> {
  request: Req;
}
/** Answers a call: an error, or the response (an object to encode, or bytes already encoded). */
export type Callback<Res> = (err: GrpcError | null, value?: Res | Buffer) => void;
export type UnaryHandler<Req = any, Res = any> = (call: UnaryCall<Req>, callback: Callback<Res>) => void; // eslint-disable-line @typescript-eslint/no-explicit-any

/** One method: its path (`/package.Service/Method`), how to read requests and write responses, and its handler. */
export interface UnaryMethod {
  decode: (bytes: Buffer) => object;
  encode: (value: object) => Buffer;
  handler: UnaryHandler;
}

export interface UnaryServerOptions {
  /** Server certificate and key (PEM). */
  cert: string;
  key: string;
  /** The only client certificate accepted (PEM): go-plugin's AutoMTLS pins the client's own. */
  clientCa: string;
  methods: ReadonlyMap<string, UnaryMethod>;
  /** The largest request accepted, in bytes; a larger one is refused with RESOURCE_EXHAUSTED. */
  maxMessageBytes: number;
}

const PREFIX_BYTES = 5;

/** Starts serving on a Unix socket; resolves once it listens. */
export async function listenUnary(socketPath: string, o: UnaryServerOptions): Promise<Http2SecureServer> {
  const server = createSecureServer({
    cert: o.cert,
    key: o.key,
    ca: o.clientCa,
    requestCert: true,
    rejectUnauthorized: true,
    allowHTTP1: false,
  });
  server.on('stream', (stream, headers) => serveStream(stream, headers, o));
  // A client that goes away mid-call, or a TLS failure, is the client's problem, not a crash.
  server.on('sessionError', () => undefined);
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

function serveStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, o: UnaryServerOptions): void {
  stream.on('error', () => undefined); // reset by the client: nothing to answer
  const method =
    headers[constants.HTTP2_HEADER_METHOD] === 'POST' ? o.methods.get(String(headers[constants.HTTP2_HEADER_PATH])) : undefined;
  if (!method) {
    // Streaming methods go-plugin probes (GRPCStdio, GRPCBroker) land here too, as with grpc-js.
    stream.resume();
    return endWith(stream, { code: GrpcStatus.UNIMPLEMENTED, details: `unknown method ${String(headers[constants.HTTP2_HEADER_PATH])}` });
  }
  readMessage(stream, o.maxMessageBytes).then(
    (bytes) => {
      let request: object;
      try {
        request = method.decode(bytes);
      } catch (err) {
        return endWith(stream, { code: GrpcStatus.INTERNAL, details: `cannot decode the request: ${(err as Error).message}` });
      }
      method.handler({ request }, (err, value) => {
        if (err) return endWith(stream, err);
        let body: Buffer;
        try {
          body = Buffer.isBuffer(value) ? value : method.encode(value);
        } catch (e) {
          return endWith(stream, { code: GrpcStatus.INTERNAL, details: `cannot encode the response: ${(e as Error).message}` });
        }
        respond(stream, body);
      });
    },
    (err: GrpcError) => endWith(stream, err),
  );
}

/** The request's one message, unprefixed. Rejects with the status to answer. */
function readMessage(stream: ServerHttp2Stream, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const fail = (err: GrpcError) => {
      stream.removeAllListeners('data');
      stream.resume();
      reject(err);
    };
    stream.on('data', (chunk: Buffer) => {
      received += chunk.length;
      chunks.push(chunk);
      if (received > PREFIX_BYTES + maxBytes) {
        fail({ code: GrpcStatus.RESOURCE_EXHAUSTED, details: `request larger than ${maxBytes} bytes` });
      }
    });
    stream.once('end', () => {
      const all = Buffer.concat(chunks);
      if (all.length < PREFIX_BYTES) return reject({ code: GrpcStatus.INTERNAL, details: 'no request message' });
      if (all[0] !== 0) return reject({ code: GrpcStatus.UNIMPLEMENTED, details: 'compressed messages are not supported' });
      const length = all.readUInt32BE(1);
      if (length > maxBytes) return reject({ code: GrpcStatus.RESOURCE_EXHAUSTED, details: `request larger than ${maxBytes} bytes` });
      if (all.length !== PREFIX_BYTES + length)
        return reject({ code: GrpcStatus.INTERNAL, details: 'expected exactly one request message' });
      resolve(all.subarray(PREFIX_BYTES));
    });
  });
}

function respond(stream: ServerHttp2Stream, message: Buffer): void {
  if (stream.destroyed || stream.closed) return; // the client went away meanwhile
  const prefix = Buffer.alloc(PREFIX_BYTES);
  prefix.writeUInt32BE(message.length, 1);
  stream.respond({ [constants.HTTP2_HEADER_STATUS]: 200, 'content-type': 'application/grpc+proto' }, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': String(GrpcStatus.OK) }));
  stream.end(Buffer.concat([prefix, message]));
}

/** A trailers-only answer: the status in the one HEADERS frame. */
function endWith(stream: ServerHttp2Stream, err: GrpcError): void {
  if (stream.destroyed || stream.closed || stream.headersSent) return;
  stream.respond(
    {
      [constants.HTTP2_HEADER_STATUS]: 200,
      'content-type': 'application/grpc+proto',
      'grpc-status': String(err.code),
      'grpc-message': percentEncode(err.details),
    },
    { endStream: true },
  );
}

/** grpc-message is percent-encoded: bytes outside printable ASCII, and '%' itself. */
function percentEncode(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}
