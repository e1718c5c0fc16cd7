/** Writes the provider's protocol descriptor (src/provider/proto-source.ts). Run by `npm run generate`. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROTO_DESCRIPTOR_FILE, renderProtoDescriptor } from '../src/provider/proto-source.js';

writeFileSync(join(import.meta.dirname, '..', PROTO_DESCRIPTOR_FILE), renderProtoDescriptor());
console.log(`wrote ${PROTO_DESCRIPTOR_FILE}`);
