import protobuf from 'protobufjs';

/**
 * The protocol's messages and services as written (.proto text): the source of
 * src/provider/generated/proto-descriptor.ts, which the provider loads instead. Parsing this text
 * took ~40 ms of every provider start (Terraform starts it 3-4 times per command) and needs
 * protobufjs's parser; its JSON descriptor loads with protobufjs/light in ~10 ms.
 */

/**
 * The subset of Terraform's plugin protocol 6.8 (docs/plugin-protocol/tfplugin6.8.proto) that
 * this provider serves, plus go-plugin's controller and the gRPC health service. Message and
 * field names and numbers match the originals; fields we never read or write are left out
 * (protobuf skips unknown fields).
 */
export const TFPLUGIN6_PROTO = `
syntax = "proto3";
package tfplugin6;

message DynamicValue { bytes msgpack = 1; bytes json = 2; }

message Diagnostic {
  enum Severity { INVALID = 0; ERROR = 1; WARNING = 2; }
  Severity severity = 1;
  string summary = 2;
  string detail = 3;
  AttributePath attribute = 4;
}

message AttributePath {
  message Step {
    oneof selector {
      string attribute_name = 1;
      string element_key_string = 2;
      int64 element_key_int = 3;
    }
  }
  repeated Step steps = 1;
}

message StopProvider {
  message Request {}
  message Response { string Error = 1; }
}

message RawState { bytes json = 1; map<string, string> flatmap = 2; }

enum StringKind { PLAIN = 0; MARKDOWN = 1; }

message Schema {
  message Block {
    int64 version = 1;
    repeated Attribute attributes = 2;
    repeated NestedBlock block_types = 3;
    string description = 4;
    StringKind description_kind = 5;
    bool deprecated = 6;
  }
  message Attribute {
    string name = 1;
    bytes type = 2;
    Object nested_type = 10;
    string description = 3;
    bool required = 4;
    bool optional = 5;
    bool computed = 6;
    bool sensitive = 7;
    StringKind description_kind = 8;
    bool deprecated = 9;
    bool write_only = 11;
  }
  message NestedBlock {
    enum NestingMode { INVALID = 0; SINGLE = 1; LIST = 2; SET = 3; MAP = 4; GROUP = 5; }
    string type_name = 1;
    Block block = 2;
    NestingMode nesting = 3;
    int64 min_items = 4;
    int64 max_items = 5;
  }
  message Object {
    enum NestingMode { INVALID = 0; SINGLE = 1; LIST = 2; SET = 3; MAP = 4; }
    repeated Attribute attributes = 1;
    NestingMode nesting = 3;
  }
  int64 version = 1;
  Block block = 2;
}

message ServerCapabilities {
  bool plan_destroy = 1;
  bool get_provider_schema_optional = 2;
  bool move_resource_state = 3;
}

message ClientCapabilities {
  bool deferral_allowed = 1;
  bool write_only_attributes_allowed = 2;
}

service Provider {
  rpc GetMetadata(GetMetadata.Request) returns (GetMetadata.Response);
  rpc GetProviderSchema(GetProviderSchema.Request) returns (GetProviderSchema.Response);
  rpc ValidateProviderConfig(ValidateProviderConfig.Request) returns (ValidateProviderConfig.Response);
  rpc ValidateResourceConfig(ValidateResourceConfig.Request) returns (ValidateResourceConfig.Response);
  rpc ValidateDataResourceConfig(ValidateDataResourceConfig.Request) returns (ValidateDataResourceConfig.Response);
  rpc UpgradeResourceState(UpgradeResourceState.Request) returns (UpgradeResourceState.Response);
  rpc ConfigureProvider(ConfigureProvider.Request) returns (ConfigureProvider.Response);
  rpc ReadResource(ReadResource.Request) returns (ReadResource.Response);
  rpc PlanResourceChange(PlanResourceChange.Request) returns (PlanResourceChange.Response);
  rpc ApplyResourceChange(ApplyResourceChange.Request) returns (ApplyResourceChange.Response);
  rpc ImportResourceState(ImportResourceState.Request) returns (ImportResourceState.Response);
  rpc ReadDataSource(ReadDataSource.Request) returns (ReadDataSource.Response);
  rpc StopProvider(StopProvider.Request) returns (StopProvider.Response);
}

message GetMetadata {
  message Request {}
  message Response {
    ServerCapabilities server_capabilities = 1;
    repeated Diagnostic diagnostics = 2;
    repeated DataSourceMetadata data_sources = 3;
    repeated ResourceMetadata resources = 4;
  }
  message DataSourceMetadata { string type_name = 1; }
  message ResourceMetadata { string type_name = 1; }
}

message GetProviderSchema {
  message Request {}
  message Response {
    Schema provider = 1;
    map<string, Schema> resource_schemas = 2;
    map<string, Schema> data_source_schemas = 3;
    repeated Diagnostic diagnostics = 4;
    Schema provider_meta = 5;
    ServerCapabilities server_capabilities = 6;
  }
}

message ValidateProviderConfig {
  message Request { DynamicValue config = 1; }
  message Response { repeated Diagnostic diagnostics = 2; }
}

message UpgradeResourceState {
  message Request { string type_name = 1; int64 version = 2; RawState raw_state = 3; }
  message Response { DynamicValue upgraded_state = 1; repeated Diagnostic diagnostics = 2; }
}

message ValidateResourceConfig {
  message Request { string type_name = 1; DynamicValue config = 2; ClientCapabilities client_capabilities = 3; }
  message Response { repeated Diagnostic diagnostics = 1; }
}

message ValidateDataResourceConfig {
  message Request { string type_name = 1; DynamicValue config = 2; }
  message Response { repeated Diagnostic diagnostics = 1; }
}

message ConfigureProvider {
  message Request { string terraform_version = 1; DynamicValue config = 2; ClientCapabilities client_capabilities = 3; }
  message Response { repeated Diagnostic diagnostics = 1; }
}

message ReadResource {
  message Request { string type_name = 1; DynamicValue current_state = 2; bytes private = 3; DynamicValue provider_meta = 4; ClientCapabilities client_capabilities = 5; }
  message Response { DynamicValue new_state = 1; repeated Diagnostic diagnostics = 2; bytes private = 3; }
}

message PlanResourceChange {
  message Request {
    string type_name = 1;
    DynamicValue prior_state = 2;
    DynamicValue proposed_new_state = 3;
    DynamicValue config = 4;
    bytes prior_private = 5;
    DynamicValue provider_meta = 6;
    ClientCapabilities client_capabilities = 7;
  }
  message Response {
    DynamicValue planned_state = 1;
    repeated AttributePath requires_replace = 2;
    bytes planned_private = 3;
    repeated Diagnostic diagnostics = 4;
  }
}

message ApplyResourceChange {
  message Request {
    string type_name = 1;
    DynamicValue prior_state = 2;
    DynamicValue planned_state = 3;
    DynamicValue config = 4;
    bytes planned_private = 5;
    DynamicValue provider_meta = 6;
  }
  message Response { DynamicValue new_state = 1; bytes private = 2; repeated Diagnostic diagnostics = 3; }
}

message ImportResourceState {
  message Request { string type_name = 1; string id = 2; ClientCapabilities client_capabilities = 3; }
  message ImportedResource { string type_name = 1; DynamicValue state = 2; bytes private = 3; }
  message Response { repeated ImportedResource imported_resources = 1; repeated Diagnostic diagnostics = 2; }
}

message ReadDataSource {
  message Request { string type_name = 1; DynamicValue config = 2; DynamicValue provider_meta = 3; ClientCapabilities client_capabilities = 4; }
  message Response { DynamicValue state = 1; repeated Diagnostic diagnostics = 2; }
}
`;

/** go-plugin's controller (Shutdown ends the process at once instead of after a kill timeout). */
export const GO_PLUGIN_PROTO = `
syntax = "proto3";
package plugin;
message Empty {}
service GRPCController { rpc Shutdown(Empty) returns (Empty); }
`;

export const HEALTH_PROTO = `
syntax = "proto3";
package grpc.health.v1;
message HealthCheckRequest { string service = 1; }
message HealthCheckResponse {
  enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
  ServingStatus status = 1;
}
service Health { rpc Check(HealthCheckRequest) returns (HealthCheckResponse); }
`;

export const PROTO_DESCRIPTOR_FILE = 'src/provider/generated/proto-descriptor.ts';

/** The generated module: the three files above parsed into one protobufjs JSON descriptor. */
export function renderProtoDescriptor(): string {
  const root = new protobuf.Root();
  for (const text of [TFPLUGIN6_PROTO, GO_PLUGIN_PROTO, HEALTH_PROTO]) protobuf.parse(text, root, { keepCase: true });
  return [
    '/* eslint-disable */',
    '// Generated from src/provider/proto-source.ts by `npm run generate` (scripts/generate-proto.ts): do not edit.',
    "import type { INamespace } from 'protobufjs/light.js';",
    // JSON text, not an object literal: protobufjs's types describe its descriptors loosely (maps, methods).
    `export const PROTO_DESCRIPTOR = JSON.parse(${JSON.stringify(JSON.stringify(root.toJSON()))}) as INamespace;`,
    '',
  ].join('\n');
}
