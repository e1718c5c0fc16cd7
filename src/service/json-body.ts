import type { FastifyInstance } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';
import { ApiError } from './errors.js';

/**
 * Request bodies are JSON (spec section 1): RFC 8259 JSON is UTF-8, so a body declared in another
 * charset or sent compressed is refused with a 415 naming the header, rather than decoded as UTF-8
 * into different text (latin1) or reported as a syntax error that quoted the compressed bytes.
 */

const unsupported = (field: string, message: string) => new ApiError('validation_error', `${field} ${message}`, [{ field, message }], 415);

/** Refuses bytes that are not UTF-8 instead of replacing them with U+FFFD. */
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The 415 for headers that say the body is not plain UTF-8 JSON, if they do. */
export function unreadableJsonBody(headers: IncomingHttpHeaders): ApiError | undefined {
  const encoding = String(headers['content-encoding'] ?? 'identity')
    .trim()
    .toLowerCase();
  if (encoding !== '' && encoding !== 'identity')
    return unsupported('Content-Encoding', `"${encoding.slice(0, 40)}" is not supported: send the body uncompressed`);
  const charset = String(headers['content-type'] ?? '')
    .split(';')
    .slice(1)
    .map((param) => param.trim().toLowerCase())
    .find((param) => param.startsWith('charset='))
    ?.slice('charset='.length)
    .replaceAll('"', '');
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')
    return unsupported('Content-Type', `charset "${charset.slice(0, 40)}" is not supported: JSON bodies are UTF-8`);
  return undefined;
}

/**
 * What JSON.parse said, without the excerpt of the body V8 adds to an unexpected token
 * (`Unexpected token 'h', "{"a": hunter2"... is not valid JSON`): the body may hold a secret, and the
 * error is logged and audited.
 */
export function jsonSyntaxProblem(err: Error): string {
  const excerpt = err.message.startsWith('Unexpected token') ? err.message.indexOf(', "') : -1;
  return excerpt > 0 ? err.message.slice(0, excerpt) : err.message;
}

/**
 * Bodies that are JSON only (anything else is a 415); triggers take no body, so an empty one is
 * accepted even when a client sends Content-Type: application/json. (Validation is ours too:
 * schema-compilers.ts, given to Fastify by createApp.)
 */
export function installJsonBodyParsing(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    const refused = unreadableJsonBody(req.headers);
    if (refused) return done(refused, undefined);
    let text: string;
    try {
      text = utf8.decode(body as Buffer);
    } catch {
      // Decoded leniently, "caf\xe9" was stored as "caf\ufffd": another name than the one sent.
      return done(
        new ApiError('validation_error', 'Body is not valid UTF-8', [{ field: '(body)', message: 'is not valid UTF-8' }]),
        undefined,
      );
    }
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      const problem = jsonSyntaxProblem(err as Error);
      done(
        new ApiError('validation_error', `Body is not valid JSON: ${problem}`, [{ field: '(body)', message: 'is not valid JSON' }]),
        undefined,
      );
    }
  });
}
