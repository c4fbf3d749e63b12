#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_proto::fuzzing::jsonrpc::jsonrpc_parse(data));
