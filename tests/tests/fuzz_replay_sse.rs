//! Replays every committed seed (and any local corpus or crash artifact) of the `sse_decode`
//! fuzz target through its body, so that CI checks them without a fuzzer.

#[test]
fn fuzz_replay_sse_decode() {
    let ran = mcp_tests::replay_fuzz_target("sse_decode", mcp_proto::fuzzing::sse::sse_decode);
    assert!(ran >= 15, "only {ran} inputs replayed");
}
