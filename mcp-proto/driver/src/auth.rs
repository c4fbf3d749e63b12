//! [`AsyncAuthenticator`]: the authentication step that awaits, run by the driver on each
//! connection's task before the router sees a request (the core applies its verdict).

use mcp_proto::server::{AuthDecision, RequestHead};

/// The authentication step that may await (a key-set fetch, token introspection, a
/// database): the driver asks it about every request that
/// [needs authentication](mcp_proto::server::Router::needs_authentication), before the head reaches
/// the router, bounded by [`DriverConfig::authentication_timeout`](crate::DriverConfig::authentication_timeout); the
/// router then applies the verdict ([`RequestHead::verdict`](mcp_proto::server::RequestHead::verdict)) as it would an
/// [`Authenticator`](mcp_proto::server::Authenticator)'s: 401 with a `Bearer` challenge naming the protected resource metadata,
/// 403 `insufficient_scope`, 503 when unavailable, and sessions bound to the principal.
///
/// A closure `Fn(&RequestHead) -> impl Future<Output = AuthDecision>` is one: take what it
/// needs from the head (the `Authorization` header) before its future starts.
pub trait AsyncAuthenticator: Send + Sync + 'static {
    /// Decides about one request from its head.
    fn authenticate(
        &self,
        head: &RequestHead<'_>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = AuthDecision> + Send + 'static>>;
}

impl<F, Fut> AsyncAuthenticator for F
where
    F: Fn(&RequestHead<'_>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = AuthDecision> + Send + 'static,
{
    fn authenticate(
        &self,
        head: &RequestHead<'_>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = AuthDecision> + Send + 'static>> {
        Box::pin(self(head))
    }
}
