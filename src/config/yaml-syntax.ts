import type { YAMLError } from 'yaml';
import { yaml } from './positions.js';

/** `yaml`'s message without its position and the source excerpt it appends (we print our own place). */
export function yamlErrorMessage(message: string): string {
  return message
    .split('\n')[0]
    .replace(/ at line \d+, column \d+:?$/, '')
    .trim();
}

/**
 * Where a YAML syntax error starts and what it says. `yaml` reports an unclosed quoted string
 * where it noticed it, at the end of the file or document: the place to fix is the opening quote,
 * found as the quoted token (lexer) that runs on to the error's position.
 */
export function syntaxErrorAt(text: string, e: Pick<YAMLError, 'code' | 'message' | 'pos'>): { offset: number; message: string } {
  const message = yamlErrorMessage(e.message);
  if (e.code !== 'MISSING_CHAR' || !/closing ["']quote/.test(message)) return { offset: e.pos[0], message };
  const { CST, Lexer } = yaml();
  // The lexer's own tokens stand for no characters of the source.
  const control = new Set([CST.DOCUMENT, CST.FLOW_END, CST.SCALAR]);
  let offset = 0;
  for (const token of new Lexer().lex(text)) {
    if (control.has(token)) continue;
    const end = offset + token.length;
    if ((token[0] === '"' || token[0] === "'") && offset < e.pos[0] && end >= e.pos[0])
      return { offset, message: `${message}: the string opened here is never closed` };
    if (offset >= e.pos[0]) break;
    offset = end;
  }
  return { offset: e.pos[0], message };
}
