/**
 * The code tables of docs/guides/errors.md, from the catalogue (src/kinds/errors.ts): each sits
 * between `<!-- codes:NAME -->` and `<!-- /codes -->`; the prose around them is hand-written.
 * Run by `npm run generate`; test/unit/kinds/errors.test.ts fails while the page is stale.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { API_ERROR_CODES, API_ERRORS, CONFIG_CODES, OTHER_STATUSES, PLAN_CODES, PROVIDER_CODES } from '../src/kinds/errors.js';

export const ERROR_DOCS = join(import.meta.dirname, '..', 'docs', 'guides', 'errors.md');

const meaningTable = (codes: Record<string, string>) => [
  '| code | meaning |',
  '|---|---|',
  ...Object.entries(codes).map(([code, meaning]) => `| \`${code}\` | ${meaning} |`),
];

function apiTable(): string[] {
  const also = (code: string) => {
    const others = Object.entries(OTHER_STATUSES)
      .filter(([, c]) => c === code)
      .map(([s]) => s);
    return others.length ? ` (also ${others.join(', ')})` : '';
  };
  return [
    '| code | status | meaning |',
    '|---|---|---|',
    ...API_ERROR_CODES.map((c) => `| \`${c}\` | ${API_ERRORS[c].status}${also(c)} | ${API_ERRORS[c].meaning} |`),
  ];
}

const TABLES: Record<string, () => string[]> = {
  api: apiTable,
  config: () => meaningTable(CONFIG_CODES),
  plan: () => meaningTable(PLAN_CODES),
  provider: () => meaningTable(PROVIDER_CODES),
};

/** The page with every table region rendered again from the catalogue. */
export function renderErrorDocs(page: string): string {
  return page.replace(/(<!-- codes:(\w+) -->\n)[\s\S]*?(<!-- \/codes -->)/g, (_, open: string, name: string, close: string) => {
    const table = TABLES[name];
    if (!table) throw new Error(`${ERROR_DOCS}: no table named ${name}`);
    return `${open}${table().join('\n')}\n${close}`;
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  writeFileSync(ERROR_DOCS, renderErrorDocs(readFileSync(ERROR_DOCS, 'utf8')));
  console.log(`wrote ${ERROR_DOCS}`);
}
