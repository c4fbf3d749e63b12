//! Replays every committed seed (and any local corpus or crash artifact) of the
//! `jsonrpc_parse` fuzz target through its body, on stable, without a fuzzer.

#[test]
fn fuzz_replay_jsonrpc_parse() {
    let ran =
        mcp_tests::replay_fuzz_target("jsonrpc_parse", mcp_proto::fuzzing::jsonrpc::jsonrpc_parse);
    assert!(ran > 0);
}
