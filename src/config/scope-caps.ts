import { scopeCapSentence } from '../kinds/index.js';
import type { ConfigError } from './errors.js';
import type { Identified } from './parse-cache.js';

/**
 * Kinds whose count the service caps per project or per tenant (`x-max-per-scope`): the first
 * document past the cap is the error, since the service would refuse its create (409) after
 * applying the ones before it. `declared` holds each resource once (duplicates already reported).
 */
export function scopeCapErrors(declared: Iterable<Identified>): ConfigError[] {
  const counts = new Map<string, number>();
  const errors: ConfigError[] = [];
  for (const item of declared) {
    const d = item.layout.descriptor;
    if (d.maxPerScope === undefined) continue;
    const group = `${item.layout.yamlKind}\0${item.project ?? ''}`;
    const count = (counts.get(group) ?? 0) + 1;
    counts.set(group, count);
    if (count !== d.maxPerScope + 1) continue;
    const where = item.project !== undefined ? `project "${item.project}"` : 'the tenant';
    errors.push({
      code: 'too_many_resources',
      ...item.nameLocation,
      subject: `${item.layout.yamlKind}/${item.name}`,
      field: 'metadata.name',
      message: `${where} declares more than ${d.maxPerScope.toLocaleString('en-US')} ${item.layout.yamlKind} documents, and ${scopeCapSentence(d)}; this is the first one past it`,
    });
  }
  return errors;
}
