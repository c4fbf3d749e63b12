//! Property test: random sequences of app commands, response heads (any status, any content
//! type), SSE events, JSON bodies, raw chunks, ends, failures and time steps, applied to a
//! `ClientSession` by an adversarial adapter whose checker asserts, on every output:
//!
//! - no intent after `close()` but the DELETE, nothing after `Closed`;
//! - the session id and version header on every request after initialize (S-SESS-4, S-VER-1);
//! - one `SessionExpired` per 404 on a request carrying the current session id, never another;
//! - no listening GET after a 405 (S-GET-3);
//! - reconnect delays never below the server's `retry` nor above the cap, and listening GETs
//!   of one reconnect loop never closer than the minimum backoff (no storm);
//! - every request ends with exactly one outcome (response, error or cancellation);
//! - `poll_timeout` never in the past after `handle_timeout`.
//!
//! The checker lives in `mcp_proto::fuzzing::client` and is shared with the `client_session`
//! fuzz target.

use mcp_proto::fuzzing::client::{Op, StartKind, run};
use proptest::prelude::*;

fn status() -> impl Strategy<Value = u16> {
    prop_oneof![
        6 => prop::sample::select(vec![200u16, 202, 204, 400, 401, 403, 404, 405, 429, 500, 503]),
        1 => 100u16..1000,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0u8..3, 0u8..5).prop_map(|(id, version)| Op::Init { id, version }),
        3 => (0u8..6, any::<u8>()).prop_map(|(id, method)| Op::Request { id, method }),
        1 => any::<bool>().prop_map(|initialized| Op::Notify { initialized }),
        1 => (0u8..4).prop_map(|id| Op::Respond { id }),
        1 => (0u8..6).prop_map(|id| Op::Cancel { id }),
        1 => Just(Op::Listen),
        1 => Just(Op::StopListening),
        1 => (0u8..4).prop_map(Op::Token),
        3 => (any::<u8>(), status(), 0u8..6, 0u8..5, any::<bool>(), 0u8..4).prop_map(
            |(pick, status, content_type, session, challenge, retry_after)| Op::Head {
                pick,
                status,
                content_type,
                session,
                challenge,
                retry_after,
            }
        ),
        3 => (any::<u8>(), 0u8..5, prop_oneof![3 => Just(0u16), 1 => 1u16..10_000], any::<u8>(), 0u8..6)
            .prop_map(|(pick, id, retry, data, msg_id)| Op::Sse { pick, id, retry, data, msg_id }),
        1 => (any::<u8>(), any::<u8>(), 0u8..6).prop_map(|(pick, data, msg_id)| Op::Json { pick, data, msg_id }),
        1 => (any::<u8>(), prop::collection::vec(any::<u8>(), 0..24))
            .prop_map(|(pick, bytes)| Op::Raw { pick, bytes }),
        2 => any::<u8>().prop_map(|pick| Op::End { pick }),
        1 => any::<u8>().prop_map(|pick| Op::Fail { pick }),
        4 => (any::<u8>(), any::<bool>()).prop_map(|(pick, sse)| Op::Auto { pick, sse }),
        3 => prop_oneof![0u32..2_000, 0u32..120_000].prop_map(|ms| Op::Advance { ms }),
    ]
}

fn start() -> impl Strategy<Value = StartKind> {
    prop_oneof![
        6 => Just(StartKind::Fresh),
        2 => Just(StartKind::Session),
        1 => Just(StartKind::Modern),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn client_session_invariants_hold(
        start in start(),
        seed in any::<u64>(),
        ops in prop::collection::vec(op(), 0..120),
    ) {
        run(start, seed, &ops);
    }

    /// A friendlier mix that reaches deep states (initialized, listening, expiring, resuming).
    #[test]
    fn client_session_invariants_hold_after_initialize(
        seed in any::<u64>(),
        ops in prop::collection::vec(op(), 0..120),
    ) {
        let mut all = vec![
            Op::Init { id: 0, version: 2 },
            Op::Auto { pick: 0, sse: false },
            Op::Auto { pick: 0, sse: false },
            Op::Listen,
        ];
        all.extend(ops);
        run(StartKind::Fresh, seed, &all);
    }
}
