//! Messages refused for authorization are held, not failed, when the hold is on
//! (`ClientConfig::with_authorization_hold`): the request waits while the app authorizes,
//! is sent again with the new token, and gets its answer; the number of re-sends is bounded;
//! a failed authorization fails what waited with the reason.

use std::time::Duration;

use mcp_proto::auth::AuthError;
use mcp_proto::client::{ClientConfig, ClientError, ClientEvent, HttpRequestKind, RequestResult};
use mcp_tests::client_harness::{Harness, Match, NetConfig, Reply, ServerConfig};

fn refuse(h: &mut Harness, status: u16, challenge: &str) {
    h.server.script(
        Match::Method("tools/call"),
        Reply::Status(
            status,
            vec![("www-authenticate", challenge.into())],
            Default::default(),
        ),
    );
}

fn held(max: u32) -> Harness {
    Harness::new(
        ClientConfig::new().with_authorization_hold(Some(max)),
        ServerConfig::default(),
        NetConfig::default(),
    )
}

fn calls(h: &Harness) -> Vec<Option<String>> {
    h.intents_of(HttpRequestKind::Post)
        .into_iter()
        .filter(|(_, r)| {
            std::str::from_utf8(&r.body)
                .unwrap_or("")
                .contains("tools/call")
        })
        .map(|(_, r)| {
            r.headers
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_owned())
        })
        .collect()
}

#[test]
fn a_refused_request_waits_for_the_authorization_and_is_sent_again_with_the_token() {
    let mut h = held(3);
    h.initialize();
    refuse(&mut h, 401, r#"Bearer scope="tools:call""#);
    let id = h.request("tools/call");
    h.run_for(Duration::from_millis(50));
    assert!(h.outcomes_of(id).is_empty(), "held, not failed");
    assert!(h.client.is_awaiting_authorization());
    assert_eq!(
        h.count_events(|e| matches!(
            e,
            ClientEvent::AwaitingAuthorization { status, challenge }
                if status.as_u16() == 401 && challenge.scope.as_deref() == Some("tools:call")
        )),
        1
    );
    h.client.set_bearer_token(Some("fresh")).unwrap();
    h.client.authorized(h.now);
    h.run_for(Duration::from_millis(50));
    assert!(h.result_of(id).is_some(), "{:?}", h.outcomes_of(id));
    assert_eq!(calls(&h), [None, Some("Bearer fresh".into())]);
    assert!(!h.client.is_awaiting_authorization());
}

#[test]
fn re_sends_after_authorization_are_bounded() {
    let mut h = held(2);
    h.initialize();
    for _ in 0..3 {
        refuse(
            &mut h,
            403,
            r#"Bearer error="insufficient_scope", scope="admin""#,
        );
    }
    let id = h.request("tools/call");
    for _ in 0..3 {
        h.run_for(Duration::from_millis(50));
        h.client.authorized(h.now);
    }
    h.run_for(Duration::from_millis(50));
    assert_eq!(calls(&h).len(), 3, "the first POST and two re-sends");
    assert_eq!(
        h.outcomes_of(id),
        [RequestResult::Failed(ClientError::Authorization(
            AuthError::RetryLimit { limit: 2 }
        ))]
    );
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::AwaitingAuthorization { .. })),
        2
    );
}

#[test]
fn a_failed_authorization_fails_what_waited_with_the_reason() {
    let mut h = held(3);
    h.initialize();
    refuse(&mut h, 401, "Bearer");
    let id = h.request("tools/call");
    h.run_for(Duration::from_millis(50));
    h.client
        .authorization_failed(h.now, AuthError::StateMismatch);
    h.run_for(Duration::from_millis(10));
    assert_eq!(
        h.outcomes_of(id),
        [RequestResult::Failed(ClientError::Authorization(
            AuthError::StateMismatch
        ))]
    );
}

#[test]
fn a_held_request_still_times_out_and_is_not_sent_after() {
    let mut h = Harness::new(
        ClientConfig::new()
            .with_authorization_hold(Some(3))
            .with_request_timeout(Some(Duration::from_secs(1))),
        ServerConfig::default(),
        NetConfig::default(),
    );
    h.initialize();
    refuse(&mut h, 401, "Bearer");
    let id = h.request("tools/call");
    h.run_for(Duration::from_secs(2));
    assert_eq!(
        h.outcomes_of(id),
        [RequestResult::Failed(ClientError::TimedOut)]
    );
    // The id is free again: a new request under it must not revive the old message.
    h.send(serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
        .unwrap();
    h.client.authorized(h.now);
    h.run_for(Duration::from_millis(50));
    assert_eq!(
        calls(&h).len(),
        1,
        "nothing re-sent for a request that ended"
    );
}

#[test]
fn without_the_hold_a_401_still_fails_at_once() {
    let mut h = Harness::default_pair();
    h.initialize();
    refuse(&mut h, 401, "Bearer");
    let id = h.request("tools/call");
    h.run_for(Duration::from_millis(50));
    assert!(matches!(
        h.outcomes_of(id).as_slice(),
        [RequestResult::Failed(
            ClientError::AuthorizationRequired { .. }
        )]
    ));
    assert_eq!(
        h.count_events(|e| matches!(e, ClientEvent::AwaitingAuthorization { .. })),
        0
    );
}

/// A DPoP signer that returns `proof(<method> <url> <token> <nonce>)`.
#[derive(Clone)]
struct Proofs;

impl mcp_proto::dpop::DpopSigner for Proofs {
    fn proof(&self, r: &mcp_proto::dpop::DpopRequest<'_>) -> Result<String, String> {
        Ok(format!(
            "proof({} {} {} {})",
            r.method,
            r.url,
            r.access_token.unwrap_or("-"),
            r.nonce.unwrap_or("-")
        ))
    }

    fn clone_box(&self) -> Box<dyn mcp_proto::dpop::DpopSigner> {
        Box::new(self.clone())
    }
}

#[test]
fn a_dpop_token_goes_with_a_proof_per_request_and_the_servers_nonce_once_asked() {
    let mut h = held(3);
    h.client
        .set_dpop_token(Some((
            "tok",
            Box::new(Proofs),
            "https://mcp.example/mcp?q=1",
        )))
        .unwrap();
    h.initialize();
    // The MCP server asks for a nonce: the request is held with the challenge's nonce.
    h.server.script(
        Match::Method("tools/call"),
        Reply::Status(
            401,
            vec![
                ("www-authenticate", r#"DPoP error="use_dpop_nonce""#.into()),
                ("dpop-nonce", "rs-1".into()),
            ],
            Default::default(),
        ),
    );
    let id = h.request("tools/call");
    h.run_for(Duration::from_millis(50));
    let nonce = h
        .events()
        .iter()
        .find_map(|e| match e {
            ClientEvent::AwaitingAuthorization { challenge, .. } => challenge.dpop_nonce.clone(),
            _ => None,
        })
        .expect("the nonce reaches the app");
    assert!(h.client.set_dpop_nonce(&nonce));
    assert!(
        !h.client.set_dpop_nonce(&nonce),
        "the same nonce twice: no second re-send"
    );
    h.client.authorized(h.now);
    h.run_for(Duration::from_millis(50));
    assert!(h.result_of(id).is_some(), "{:?}", h.outcomes_of(id));
    let posts: Vec<_> = h.intents_of(HttpRequestKind::Post);
    for (_, p) in &posts {
        assert_eq!(p.headers["authorization"], "DPoP tok");
    }
    let proofs: Vec<String> = posts
        .iter()
        .map(|(_, p)| p.headers["dpop"].to_str().unwrap().to_owned())
        .collect();
    assert_eq!(proofs[0], "proof(POST https://mcp.example/mcp tok -)");
    assert_eq!(
        proofs.last().unwrap(),
        "proof(POST https://mcp.example/mcp tok rs-1)"
    );
    // A bearer token replaces it.
    h.client.set_dpop_token(None).unwrap();
    h.client.set_bearer_token(Some("b")).unwrap();
    assert!(!h.client.set_dpop_nonce("x"), "no DPoP token: no nonce");
}
