//! Replays the committed `client_session` fuzz seeds (and any local corpus or crash) through
//! the fuzz body, so every `cargo test` checks them.

#[test]
fn replay_client_session_corpus() {
    let n =
        mcp_tests::replay_fuzz_target("client_session", mcp_proto::fuzzing::client::client_session);
    assert!(n >= 10, "only {n} inputs");
}
