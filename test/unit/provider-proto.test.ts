import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { loadDefinitions } from '../../src/provider/proto.js';
import {
  GO_PLUGIN_PROTO,
  HEALTH_PROTO,
  PROTO_DESCRIPTOR_FILE,
  renderProtoDescriptor,
  TFPLUGIN6_PROTO,
} from '../../src/provider/proto-source.js';

const REPO = join(import.meta.dirname, '..', '..');

describe('the provider’s protocol descriptor, generated at build time', () => {
  it(`${PROTO_DESCRIPTOR_FILE} matches the .proto text (run \`npm run generate\` when this fails)`, () => {
    expect(readFileSync(join(REPO, PROTO_DESCRIPTOR_FILE), 'utf8')).toBe(renderProtoDescriptor());
  });

  it('encodes and decodes exactly as the .proto text parsed at run time does', () => {
    const root = new protobuf.Root();
    for (const text of [TFPLUGIN6_PROTO, GO_PLUGIN_PROTO, HEALTH_PROTO]) protobuf.parse(text, root, { keepCase: true });
    root.resolveAll();
    const defs = loadDefinitions();
    expect(Object.keys(defs).sort()).toEqual(['grpc.health.v1.Health', 'plugin.GRPCController', 'tfplugin6.Provider']);
    const provider = defs['tfplugin6.Provider'];
    expect(Object.keys(provider)).toEqual(root.lookupService('tfplugin6.Provider').methodsArray.map((m) => m.name));
    // A message with a oneof, an enum, an int64, a map, bytes and nested repeated messages.
    const request = {
      type_name: 'dataplatform_connector',
      prior_state: { msgpack: Buffer.from([0x81, 0xa1, 0x61, 0x01]) },
      prior_private: Buffer.from('p'),
      config: { json: Buffer.from('{"a":1}') },
    };
    const response = {
      diagnostics: [{ severity: 1, summary: 's', detail: 'd', attribute: { steps: [{ attribute_name: 'spec' }, { element_key_int: 3 }] } }],
      requires_replace: [{ steps: [{ element_key_string: 'k' }] }],
    };
    const type = (name: string) => root.lookupType(name);
    const rawRequest = type('tfplugin6.PlanResourceChange.Request');
    const rawResponse = type('tfplugin6.PlanResourceChange.Response');
    const bytes = provider.PlanResourceChange.responseSerialize(response);
    expect(bytes).toEqual(Buffer.from(rawResponse.encode(rawResponse.fromObject(response)).finish()));
    const options = { longs: Number, enums: Number, defaults: true, oneofs: true };
    expect(provider.PlanResourceChange.responseDeserialize(bytes)).toEqual(rawResponse.toObject(rawResponse.decode(bytes), options));
    const requestBytes = Buffer.from(rawRequest.encode(rawRequest.fromObject(request)).finish());
    expect(provider.PlanResourceChange.requestDeserialize(requestBytes)).toEqual(
      rawRequest.toObject(rawRequest.decode(requestBytes), options),
    );
  });
});
