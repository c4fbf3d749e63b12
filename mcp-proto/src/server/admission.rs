//! Admission: what the configuration alone says of a request — the methods the endpoint
//! allows, the authentication verdict, the revision a header names and whether it is the
//! modern era, the refusal of an unsupported one and its body, CORS headers. No session,
//! stream or timer is read here: these are the router's checks that need nothing but the
//! [`ServerConfig`], kept apart from the parts they precede.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, StatusCode};

use super::error::ProtocolError;
use super::security::{AuthDecision, bearer_challenge, dpop_challenge};
use super::{RequestHead, ServerConfig};
use crate::http::{accepts, content_type_is, header as mcp_header, header_name, mime};
use crate::jsonrpc::{ErrorObject, Response};
use crate::{Era, ProtocolVersion};

impl ServerConfig {
    /// The answer to a request for the protected-resource metadata document (RFC 9728):
    /// status, headers and body (none for `HEAD` and the preflight).
    pub(crate) fn metadata_answer(
        &self,
        head: &RequestHead<'_>,
    ) -> Result<(StatusCode, HeaderMap, Option<Bytes>), ProtocolError> {
        let Some(prm) = &self.security.protected_resource else {
            return Err(ProtocolError::NotFound);
        };
        let mut headers = HeaderMap::new();
        // Public metadata: readable from any browser origin.
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        if head.method == Method::OPTIONS {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, OPTIONS"),
            );
            return Ok((StatusCode::NO_CONTENT, headers, None));
        }
        if head.method != Method::GET && head.method != Method::HEAD {
            return Err(ProtocolError::MethodNotAllowed);
        }
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(mime::APPLICATION_JSON),
        );
        let body = (head.method == Method::GET).then(|| Bytes::from(prm.to_json()));
        Ok((StatusCode::OK, headers, body))
    }

    /// The headers of the 204 answering `OPTIONS` on the endpoint: `Allow`, and with CORS
    /// configured and an `Origin`, the CORS preflight answer (403 for an origin CORS does
    /// not allow).
    pub(crate) fn options_answer(
        &self,
        head: &RequestHead<'_>,
        origin: Option<&str>,
    ) -> Result<HeaderMap, (ProtocolError, HeaderMap)> {
        let allow = self.allow(Some(head.headers));
        let mut headers = match (&self.security.cors, origin) {
            (Some(cors), Some(origin)) => cors
                .preflight(Some(origin), allow.clone())
                .ok_or((ProtocolError::OriginNotAllowed, HeaderMap::new()))?,
            _ => {
                let mut headers = HeaderMap::new();
                self.cors_headers(origin, &mut headers);
                headers
            }
        };
        headers.insert(header::ALLOW, allow);
        Ok(headers)
    }

    /// The checks of a POST's head that need only the configuration: `Accept` against the
    /// response mode (406), `Content-Type` (415), a declared `Content-Length` over the cap
    /// (413). Returns whether the client accepts JSON and SSE.
    pub(crate) fn post_head_checks(
        &self,
        head: &RequestHead<'_>,
    ) -> Result<(bool, bool), ProtocolError> {
        use super::ResponseMode as M;
        let accept_json = accepts(head.headers, mime::APPLICATION_JSON);
        let accept_sse = accepts(head.headers, mime::TEXT_EVENT_STREAM);
        match self.response_mode {
            M::Json if !accept_json => {
                return Err(ProtocolError::NotAcceptable(mime::APPLICATION_JSON));
            }
            M::Sse if !accept_sse => {
                return Err(ProtocolError::NotAcceptable(mime::TEXT_EVENT_STREAM));
            }
            _ if !accept_json && !accept_sse => {
                return Err(ProtocolError::NotAcceptable(mime::POST_ACCEPT));
            }
            _ => {}
        }
        if !content_type_is(head.headers, mime::APPLICATION_JSON) {
            return Err(ProtocolError::UnsupportedMediaType);
        }
        let declared = head
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.limits.max_body_bytes as u64) {
            return Err(ProtocolError::PayloadTooLarge(self.limits.max_body_bytes));
        }
        Ok((accept_json, accept_sse))
    }

    /// The methods the endpoint answers, for `Allow`: POST and OPTIONS always; GET and DELETE
    /// when sessions exist (a legacy revision is served, the server is not stateless, the
    /// request does not name the modern revision) and the config enables them.
    pub(crate) fn allow(&self, headers: Option<&HeaderMap>) -> HeaderValue {
        let sessions = !self.stateless
            && self
                .supported_versions
                .iter()
                .any(|v| v.era() == Era::Legacy)
            && !headers.is_some_and(|h| self.is_modern(h));
        HeaderValue::from_static(
            match (
                sessions && self.enable_get_stream,
                sessions && self.enable_delete,
            ) {
                (true, true) => "GET, POST, DELETE, OPTIONS",
                (true, false) => "GET, POST, OPTIONS",
                (false, true) => "POST, DELETE, OPTIONS",
                (false, false) => "POST, OPTIONS",
            },
        )
    }

    pub(crate) fn authenticate(
        &mut self,
        head: &RequestHead<'_>,
    ) -> Result<Option<Box<str>>, (ProtocolError, HeaderMap)> {
        let decision = match (head.verdict, self.security.authenticator.as_mut()) {
            (Some(verdict), _) => verdict.clone(),
            // Configured but not run (a router driven without the driver): fail closed.
            (None, _) if self.security.requires_verdict => AuthDecision::Unavailable {
                description: Some("the asynchronous authenticator did not run".to_owned()),
            },
            (None, Some(auth)) => auth.authenticate(head),
            (None, None) => return Ok(head.principal.map(Into::into)),
        };
        let prm = self.security.protected_resource.as_ref();
        let mut extra = HeaderMap::new();
        match decision {
            AuthDecision::Allow { principal } => Ok(principal.map(Into::into)),
            AuthDecision::Unavailable { description } => Err((
                ProtocolError::AuthenticationUnavailable(description.map(Into::into)),
                extra,
            )),
            AuthDecision::Unauthorized {
                error,
                description,
                scope,
            } => {
                extra.insert(
                    header::WWW_AUTHENTICATE,
                    bearer_challenge(
                        prm,
                        error.as_deref(),
                        description.as_deref(),
                        scope.as_deref(),
                    ),
                );
                Err((ProtocolError::Unauthorized, extra))
            }
            AuthDecision::DpopUnauthorized {
                error,
                description,
                algs,
                nonce,
            } => {
                extra.insert(
                    header::WWW_AUTHENTICATE,
                    dpop_challenge(prm, error.as_deref(), description.as_deref(), &algs),
                );
                if let Some(n) = nonce.and_then(|n| http::HeaderValue::try_from(n).ok()) {
                    extra.insert(http::HeaderName::from_static(crate::http::DPOP_NONCE), n);
                }
                Err((ProtocolError::Unauthorized, extra))
            }
            AuthDecision::InsufficientScope { scope, description } => {
                extra.insert(
                    header::WWW_AUTHENTICATE,
                    bearer_challenge(
                        prm,
                        Some("insufficient_scope"),
                        description.as_deref(),
                        Some(&scope),
                    ),
                );
                Err((ProtocolError::InsufficientScope, extra))
            }
        }
    }

    /// `MCP-Protocol-Version`: `Ok(None)` when absent, `Err` when unsupported.
    pub(crate) fn header_version(
        &self,
        headers: &HeaderMap,
    ) -> Result<Option<ProtocolVersion>, ()> {
        let Some(v) = headers.get(&header_name::MCP_PROTOCOL_VERSION) else {
            return Ok(None);
        };
        let v = v.to_str().map_err(|_| ())?;
        match ProtocolVersion::parse(v) {
            Some(v) if self.supported_versions.contains(&v) => Ok(Some(v)),
            _ => Err(()),
        }
    }

    // S-NEW-7.
    /// Whether the request speaks the modern era: modern revisions are enabled and its
    /// `MCP-Protocol-Version` names one (the header selects the era).
    pub(crate) fn is_modern(&self, headers: &HeaderMap) -> bool {
        self.is_modern_version(self.header_version(headers))
    }

    /// [`is_modern`](Self::is_modern) of a header version already read.
    pub(crate) fn is_modern_version(&self, version: Result<Option<ProtocolVersion>, ()>) -> bool {
        self.modern_enabled() && matches!(version, Ok(Some(v)) if v.era() == Era::Modern)
    }

    // S-NEW-7, S-VER-4, G-11.
    /// The refusal for an unsupported `MCP-Protocol-Version`: -32022 with the supported list
    /// when the modern era is on, else the legacy -32000.
    pub(crate) fn unsupported_version(&self, requested: Option<&str>) -> ProtocolError {
        if self.modern_enabled() {
            ProtocolError::UnsupportedProtocolVersion(requested.unwrap_or_default().into())
        } else {
            ProtocolError::UnsupportedVersion
        }
    }

    /// A JSON-RPC error body for `error`, with `id`; the -32022 body carries `data.supported`
    /// and `data.requested` (`UnsupportedProtocolVersionError`).
    pub(crate) fn protocol_error_body(
        &self,
        id: Option<crate::jsonrpc::RequestId>,
        error: &ProtocolError,
    ) -> Bytes {
        let mut object = ErrorObject::new(error.code(), error.to_string());
        if let ProtocolError::UnsupportedProtocolVersion(requested) = error {
            let supported: Vec<&str> = self.supported_versions.iter().map(|v| v.as_str()).collect();
            let data = serde_json::json!({ "supported": supported, "requested": requested });
            object.data = serde_json::value::to_raw_value(&data).ok();
        }
        if let Some(secs) = error.retry_after_secs() {
            let data = serde_json::json!({ "retryAfter": secs });
            object.data = serde_json::value::to_raw_value(&data).ok();
        }
        Response::error(id, object).to_bytes()
    }

    pub(crate) fn cors_headers(&self, origin: Option<&str>, headers: &mut HeaderMap) {
        if let Some(cors) = &self.security.cors {
            cors.apply(origin, headers);
        }
    }
}

pub(crate) fn origin_of(headers: &HeaderMap) -> Option<Box<str>> {
    headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .map(Into::into)
}

/// The raw `MCP-Protocol-Version` text, if readable.
pub(crate) fn raw_version(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(&header_name::MCP_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

// S-NEW-7, S-NEW-8.
/// The headers a modern request mirrors from its body, kept until the
/// body is complete: `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`.
pub(crate) fn mirrored_headers(headers: &HeaderMap) -> HeaderMap {
    let mut kept = HeaderMap::new();
    for (name, value) in headers {
        let n = name.as_str();
        if n == mcp_header::MCP_PROTOCOL_VERSION
            || n == mcp_header::MCP_METHOD
            || n == mcp_header::MCP_NAME
            || n.starts_with(crate::mirror::MCP_PARAM_PREFIX)
        {
            kept.append(name.clone(), value.clone());
        }
    }
    kept
}
