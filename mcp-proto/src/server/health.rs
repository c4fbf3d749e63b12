//! Liveness and readiness, for a Kubernetes probe or a load balancer's health check
//! ([`ServerConfig::with_health`](super::ServerConfig::with_health)).
//!
//! Off by default. When configured, the router answers `GET`/`HEAD` on the liveness and
//! readiness paths itself, on the same listener as the MCP endpoint, before every other
//! check: no `Host`/`Origin` validation (a probe names the pod's IP address as `Host`), no
//! authentication, no limit, and nothing else is exposed there. Other methods get 405.
//!
//! - Liveness answers `200 {"status":"ok"}` while the router runs, draining included: the
//!   process is alive, and restarting it would cut the drain short.
//! - Readiness answers `200 {"status":"ok"}`, or `503 {"status":"not ready","reason":…}`
//!   while draining (`"draining"`) or while the cluster store is unreachable
//!   (`"cluster store unreachable: …"`, as the store's backend reported it through
//!   [`Router::handle_store_unreachable`]; ready again at
//!   [`Router::handle_store_reachable`]). A store that never reported is taken as reachable.
//!
//! Every answer carries `Cache-Control: no-store`.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, StatusCode};

use super::cluster::StoreError;
use super::{RequestHead, Router};
use crate::http::mime;

/// Where the health answers are served (see the module documentation). Default: nowhere.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Health {
    /// The liveness path (`/healthz`), or none.
    pub liveness: Option<String>,
    /// The readiness path (`/readyz`), or none.
    pub readiness: Option<String>,
}

impl Health {
    /// No health paths (add them with [`liveness`](Self::liveness) and
    /// [`readiness`](Self::readiness)).
    pub fn new() -> Self {
        Health::default()
    }

    /// Serves liveness at `path` (`/healthz`). It must differ from the MCP endpoint's path.
    pub fn liveness(mut self, path: impl Into<String>) -> Self {
        self.liveness = Some(path.into());
        self
    }

    /// Serves readiness at `path` (`/readyz`). It must differ from the MCP endpoint's path.
    pub fn readiness(mut self, path: impl Into<String>) -> Self {
        self.readiness = Some(path.into());
        self
    }

    /// Whether `path` is one of the health paths.
    pub(crate) fn serves(&self, path: &str) -> bool {
        self.liveness.as_deref() == Some(path) || self.readiness.as_deref() == Some(path)
    }
}

/// Whether the router should be sent traffic ([`Router::readiness`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Readiness {
    /// Ready.
    Ready,
    /// A draining shutdown began.
    Draining,
    /// The cluster store's backend reported it unreachable.
    StoreUnreachable(StoreError),
}

impl Readiness {
    /// The reason given in a 503 body, `None` when ready.
    pub fn reason(&self) -> Option<String> {
        match self {
            Readiness::Ready => None,
            Readiness::Draining => Some("draining".to_owned()),
            Readiness::StoreUnreachable(e) => Some(format!("cluster store unreachable: {}", e.0)),
        }
    }
}

/// What the router knows of its cluster store's reachability.
#[derive(Debug, Clone, Default)]
pub(crate) struct HealthState {
    /// Set by [`Router::handle_store_unreachable`], cleared by
    /// [`Router::handle_store_reachable`].
    pub(crate) store_down: Option<StoreError>,
}

impl Router {
    /// Query: whether this router should be sent traffic: not while draining, nor while its
    /// cluster store is reported unreachable. What the readiness path answers.
    pub fn readiness(&self) -> Readiness {
        if self.is_draining() {
            return Readiness::Draining;
        }
        match &self.health.store_down {
            Some(e) => Readiness::StoreUnreachable(e.clone()),
            None => Readiness::Ready,
        }
    }

    /// Input: the cluster store's backend lost the store (its connection broke, or every
    /// command times out); readiness answers 503 with `error` until
    /// [`handle_store_reachable`](Self::handle_store_reachable). Requests keep being served as
    /// before (those that need the store get 503 from its timeout).
    pub fn handle_store_unreachable(&mut self, now: std::time::Instant, error: StoreError) {
        self.advance(now);
        self.health.store_down = Some(error);
    }

    /// Input: the cluster store's backend reaches the store (again).
    pub fn handle_store_reachable(&mut self, now: std::time::Instant) {
        self.advance(now);
        self.health.store_down = None;
    }

    /// The answer to a request for a health path, or `None` when `head` is not one.
    pub(crate) fn health_answer(
        &self,
        head: &RequestHead<'_>,
    ) -> Option<(StatusCode, HeaderMap, Option<Bytes>)> {
        let health = &self.config.health;
        let path = head.uri.path();
        // A health path that names the endpoint would shadow it: the endpoint wins.
        if !health.serves(path) || path == self.config.endpoint_path {
            return None;
        }
        let mut headers = HeaderMap::new();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(mime::APPLICATION_JSON),
        );
        if head.method != Method::GET && head.method != Method::HEAD {
            headers.insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            let body = Bytes::from_static(br#"{"status":"method not allowed"}"#);
            return Some((StatusCode::METHOD_NOT_ALLOWED, headers, Some(body)));
        }
        let (status, body) = match self.readiness().reason() {
            Some(reason) if health.readiness.as_deref() == Some(path) => {
                let body = serde_json::json!({"status": "not ready", "reason": reason});
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    Bytes::from(body.to_string()),
                )
            }
            _ => (StatusCode::OK, Bytes::from_static(br#"{"status":"ok"}"#)),
        };
        Some((
            status,
            headers,
            (head.method == Method::GET).then_some(body),
        ))
    }
}
