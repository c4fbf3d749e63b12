//! The client session under arbitrary sequences of commands, response heads, body chunks,
//! ends, failures and time steps: no panic, bounded memory, every invariant of
//! `mcp_proto::fuzzing::client` checked after each step.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_proto::fuzzing::client::client_session(data));
