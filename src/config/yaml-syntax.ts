import type { YAMLError } from 'yaml';
import { yaml } from './positions.js';

/** `yaml`'s message without its position and the source excerpt it appends (we print our own place). */
export function yamlErrorMessage(message: string): string {
  return message
    .split('\n')[0]
    .replace(/ at line \d+, column \d+:?$/, '')
    .trim();
}

/** The lexer's own tokens, which stand for no characters of the source (yaml's cst.ts: DOCUMENT, FLOW_END, SCALAR). */
const CONTROL = new Set(['\x02', '\x18', '\x1f']);

/**
 * Where a YAML syntax error starts and what it says. `yaml` reports an unclosed quoted string
 * where it noticed it, at the end of the file or document: the place to fix is the opening quote,
 * found as the quoted token (lexer) that runs on to the error's position.
 */
export function syntaxErrorAt(text: string, e: Pick<YAMLError, 'code' | 'message' | 'pos'>): { offset: number; message: string } {
  const message = yamlErrorMessage(e.message);
  if (e.code !== 'MISSING_CHAR' || !/closing ["']quote/.test(message)) return { offset: e.pos[0], message };
  let offset = 0;
  for (const token of new (yaml().Lexer)().lex(text)) {
    if (CONTROL.has(token)) continue; // the lexer's markers (document, scalar, flow end) are not in the text
    const end = offset + token.length;
    if ((token[0] === '"' || token[0] === "'") && offset < e.pos[0] && end >= e.pos[0])
      return { offset, message: `${message}: the string opened here is never closed` };
    if (offset >= e.pos[0]) break;
    offset = end;
  }
  return { offset: e.pos[0], message };
}
