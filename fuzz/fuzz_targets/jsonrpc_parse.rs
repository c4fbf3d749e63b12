//! JSON-RPC envelope parser: no panic, and every accepted message round-trips
//! (see `mcp_proto::fuzzing::jsonrpc::jsonrpc_parse`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_proto::fuzzing::jsonrpc::jsonrpc_parse(data));
