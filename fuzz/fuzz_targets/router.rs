//! The server `Router` under arbitrary sequences of requests, body chunks, disconnects, app
//! commands and time steps: no panic, bounded memory, invariants of
//! `mcp_proto::fuzzing::router` checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_proto::fuzzing::router::router(data));
