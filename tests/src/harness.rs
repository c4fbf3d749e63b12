//! Helpers for the end-to-end service tests: a client that answers the server's requests the
//! way the conformance client does, and a one-call setup.

use std::collections::BTreeMap;

use mcp_service::Server;
use mcp_service::client::{Client, ClientBuilder};
use mcp_service::schema::{
    CreateMessageResult, ElicitAction, ElicitRequestParams, ElicitResult, ElicitValue, Role,
    SamplingMessageContentBlock, StopReason, TextContent,
};

use crate::exec::Executor;
use crate::loopback::Loopback;

/// What the conformance client's model answers.
pub const SAMPLING_ANSWER: &str = "This is a test response from the client";

/// A client with sampling and elicitation handlers that answer like the conformance client:
/// sampling with [`SAMPLING_ANSWER`] (echoing nothing), a form with `username`/`email`
/// filled in as `testuser`/`test@example.com` and every other field at its default.
pub fn conformance_client() -> ClientBuilder {
    Client::builder("conformance-test-client", "1.0.0")
        .sampling_handler(|params| async move {
            let _ = params;
            Ok(CreateMessageResult {
                role: Role::Assistant,
                content: SamplingMessageContentBlock::Text(TextContent::new(SAMPLING_ANSWER))
                    .into(),
                model: "test-model".into(),
                stop_reason: Some(StopReason::EndTurn),
                meta: None,
                extra: Default::default(),
            })
        })
        .elicitation_handler(|params| async move {
            let ElicitRequestParams::Form(form) = params else {
                return Ok(ElicitResult::new(ElicitAction::Decline));
            };
            let mut content: BTreeMap<String, ElicitValue> = form.requested_schema.defaults();
            for (name, value) in [("username", "testuser"), ("email", "test@example.com")] {
                if form.requested_schema.property(name).is_some() {
                    content.insert(name.into(), ElicitValue::String(value.into()));
                }
            }
            let mut result = ElicitResult::new(ElicitAction::Accept);
            result.content = Some(content);
            Ok(result)
        })
}

/// A fresh executor and a loopback pair between `server` and a client built from `builder`.
pub fn pair(server: &Server, builder: ClientBuilder) -> (Executor, Loopback) {
    let exec = Executor::new();
    let lb = Loopback::connect(&exec, server, builder);
    (exec, lb)
}

/// Runs `future` for at most `limit` of virtual time on `exec`: its output, or `None` (and
/// the future dropped, which cancels what it was doing) when time ran out first.
pub async fn timeout<T>(
    exec: &Executor,
    limit: std::time::Duration,
    future: impl std::future::Future<Output = T>,
) -> Option<T> {
    let mut future = std::pin::pin!(future);
    let mut sleep = std::pin::pin!(exec.sleep(limit));
    std::future::poll_fn(|cx| {
        if let std::task::Poll::Ready(v) = future.as_mut().poll(cx) {
            return std::task::Poll::Ready(Some(v));
        }
        sleep.as_mut().poll(cx).map(|()| None)
    })
    .await
}
