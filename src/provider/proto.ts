// The light build: no .proto parser, which only the code generator needs (proto-source.ts).
import protobuf from 'protobufjs/light.js';
import { PROTO_DESCRIPTOR } from './generated/proto-descriptor.js';

/** How messages read from the wire look: proto-loader's `longs: Number, enums: Number, defaults, oneofs`. */
const TO_OBJECT: protobuf.IConversionOptions = { longs: Number, enums: Number, defaults: true, oneofs: true };

/**
 * One unary method: its path on the wire and how its messages are written and read. The shape of
 * grpc-js's method definitions, so the tests' grpc-js clients take these as they are
 * (`grpc.loadPackageDefinition`).
 */
export interface MethodDefinition {
  path: string;
  requestStream: false;
  responseStream: false;
  originalName: string;
  requestSerialize: (value: object) => Buffer;
  requestDeserialize: (bytes: Buffer) => object;
  responseSerialize: (value: object) => Buffer;
  responseDeserialize: (bytes: Buffer) => object;
}
export type ServiceDefinition = Record<string, MethodDefinition>;

/**
 * The services, keyed by full name (`tfplugin6.Provider`, ...), built straight from protobufjs
 * types rather than with @grpc/proto-loader, whose reflection descriptors (which we never serve)
 * cost ~25 ms of every provider start-up, and Terraform starts the provider several times per command.
 */
export function loadDefinitions(): Record<string, ServiceDefinition> {
  const root = protobuf.Root.fromJSON(PROTO_DESCRIPTOR);
  root.resolveAll();
  const services: Record<string, ServiceDefinition> = {};
  const visit = (ns: protobuf.NamespaceBase) => {
    for (const child of ns.nestedArray) {
      if (child instanceof protobuf.Service) services[child.fullName.slice(1)] = serviceDefinition(child);
      else if (child instanceof protobuf.Namespace || child instanceof protobuf.Type) visit(child);
    }
  };
  visit(root);
  return services;
}

function serviceDefinition(service: protobuf.Service): ServiceDefinition {
  const definition: ServiceDefinition = {};
  for (const method of service.methodsArray) {
    const request = method.resolvedRequestType!;
    const response = method.resolvedResponseType!;
    definition[method.name] = {
      path: `/${service.fullName.slice(1)}/${method.name}`,
      requestStream: false,
      responseStream: false,
      originalName: method.name,
      requestSerialize: serializer(request),
      requestDeserialize: deserializer(request),
      responseSerialize: serializer(response),
      responseDeserialize: deserializer(response),
    };
  }
  return definition;
}

// protobufjs writes into a Buffer under Node.
const serializer = (type: protobuf.Type) => (value: object) => type.encode(type.fromObject(value)).finish() as Buffer;
const deserializer = (type: protobuf.Type) => (bytes: Buffer) => type.toObject(type.decode(bytes), TO_OBJECT);
