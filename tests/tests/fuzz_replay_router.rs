//! Replays the committed seeds (and any local corpus or crash) of the `router` fuzz target.

#[test]
fn replay_router_seeds() {
    let n = mcp_tests::replay_fuzz_target("router", mcp_proto::fuzzing::router::router);
    assert!(n >= 10);
}
