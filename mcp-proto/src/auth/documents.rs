//! The JSON documents of the flow, read member by member so that every defect is a typed
//! [`AuthError`] naming the document: protected resource metadata (RFC 9728 §2), authorization
//! server metadata (RFC 8414 §2, OpenID Connect Discovery 1.0 §3), registration responses
//! (RFC 7591 §3.2), token responses (RFC 6749 §5.1) and OAuth error objects (RFC 6749 §5.2).
//! Unknown members are ignored, as those specifications require.

use std::time::Duration;

use serde_json::{Map, Value};

use super::config::TokenAuthMethod;
use super::error::{AuthError, Document, OAuthErrorBody};

fn malformed(document: Document, detail: impl Into<String>) -> AuthError {
    AuthError::Malformed {
        document,
        detail: detail.into(),
    }
}

fn object(document: Document, body: &[u8]) -> Result<Map<String, Value>, AuthError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(malformed(document, "not a JSON object")),
        Err(e) => Err(malformed(document, format!("not JSON: {e}"))),
    }
}

/// An optional string member; present with another type is an error.
fn opt_str(
    m: &Map<String, Value>,
    key: &str,
    document: Document,
) -> Result<Option<String>, AuthError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(malformed(document, format!("{key} is not a string"))),
    }
}

fn req_str(m: &Map<String, Value>, key: &str, document: Document) -> Result<String, AuthError> {
    opt_str(m, key, document)?.ok_or_else(|| malformed(document, format!("{key} is missing")))
}

/// An optional array of strings.
fn opt_strings(
    m: &Map<String, Value>,
    key: &str,
    document: Document,
) -> Result<Option<Vec<String>>, AuthError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                _ => Err(malformed(document, format!("{key} has a non-string item"))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(malformed(document, format!("{key} is not an array"))),
    }
}

fn opt_bool(m: &Map<String, Value>, key: &str, document: Document) -> Result<bool, AuthError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(malformed(document, format!("{key} is not a boolean"))),
    }
}

/// Protected resource metadata (RFC 9728 §2): what this client reads of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceMetadata {
    pub(crate) resource: String,
    pub(crate) authorization_servers: Vec<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
}

pub(crate) fn resource_metadata(body: &[u8]) -> Result<ResourceMetadata, AuthError> {
    let d = Document::ResourceMetadata;
    let m = object(d, body)?;
    let resource = req_str(&m, "resource", d)?;
    let authorization_servers = opt_strings(&m, "authorization_servers", d)?.unwrap_or_default();
    if authorization_servers.is_empty() {
        // MCP authorization, "Authorization Server Location": at least one.
        return Err(malformed(d, "authorization_servers is missing or empty"));
    }
    Ok(ResourceMetadata {
        resource,
        authorization_servers,
        scopes_supported: opt_strings(&m, "scopes_supported", d)?,
    })
}

/// Authorization server metadata (RFC 8414 §2): what this client reads of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerMetadata {
    pub(crate) issuer: String,
    pub(crate) authorization_endpoint: Option<String>,
    pub(crate) token_endpoint: Option<String>,
    pub(crate) registration_endpoint: Option<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
    pub(crate) response_types_supported: Option<Vec<String>>,
    pub(crate) grant_types_supported: Option<Vec<String>>,
    pub(crate) code_challenge_methods_supported: Option<Vec<String>>,
    pub(crate) token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub(crate) iss_parameter_supported: bool,
    pub(crate) client_id_metadata_document_supported: bool,
}

impl ServerMetadata {
    /// Metadata naming `issuer` and nothing else.
    pub(crate) fn new(issuer: String) -> Self {
        ServerMetadata {
            issuer,
            authorization_endpoint: None,
            token_endpoint: None,
            registration_endpoint: None,
            scopes_supported: None,
            response_types_supported: None,
            grant_types_supported: None,
            code_challenge_methods_supported: None,
            token_endpoint_auth_methods_supported: None,
            iss_parameter_supported: false,
            client_id_metadata_document_supported: false,
        }
    }
}

pub(crate) fn server_metadata(body: &[u8]) -> Result<ServerMetadata, AuthError> {
    let d = Document::ServerMetadata;
    let m = object(d, body)?;
    Ok(ServerMetadata {
        issuer: req_str(&m, "issuer", d)?,
        authorization_endpoint: opt_str(&m, "authorization_endpoint", d)?,
        token_endpoint: opt_str(&m, "token_endpoint", d)?,
        registration_endpoint: opt_str(&m, "registration_endpoint", d)?,
        scopes_supported: opt_strings(&m, "scopes_supported", d)?,
        response_types_supported: opt_strings(&m, "response_types_supported", d)?,
        grant_types_supported: opt_strings(&m, "grant_types_supported", d)?,
        code_challenge_methods_supported: opt_strings(&m, "code_challenge_methods_supported", d)?,
        token_endpoint_auth_methods_supported: opt_strings(
            &m,
            "token_endpoint_auth_methods_supported",
            d,
        )?,
        iss_parameter_supported: opt_bool(&m, "authorization_response_iss_parameter_supported", d)?,
        client_id_metadata_document_supported: opt_bool(
            &m,
            "client_id_metadata_document_supported",
            d,
        )?,
    })
}

impl ServerMetadata {
    /// The token endpoint authentication methods the server accepts; RFC 8414 §2: absent
    /// means `client_secret_basic`.
    pub(crate) fn auth_methods(&self) -> Vec<String> {
        self.token_endpoint_auth_methods_supported
            .clone()
            .unwrap_or_else(|| vec!["client_secret_basic".to_owned()])
    }

    pub(crate) fn supports_method(&self, m: TokenAuthMethod) -> bool {
        self.auth_methods().iter().any(|s| s == m.as_str())
    }
}

/// The ID-JAG of a token exchange response (RFC 8693 §2.2.1): `access_token`, with
/// `issued_token_type` the ID-JAG's.
pub(crate) fn id_jag(body: &[u8]) -> Result<String, AuthError> {
    let bad = |why: &str| AuthError::Malformed {
        document: Document::TokenExchange,
        detail: why.to_owned(),
    };
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|_| bad("not JSON"))?;
    if v.get("issued_token_type").and_then(|t| t.as_str()) != Some(super::config::ID_JAG_TOKEN_TYPE)
    {
        return Err(bad("issued_token_type is not an ID-JAG"));
    }
    match v.get("access_token").and_then(|t| t.as_str()) {
        Some(t) if !t.is_empty() => Ok(t.to_owned()),
        _ => Err(bad("no access_token")),
    }
}

/// A registration response (RFC 7591 §3.2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Registration {
    pub(crate) client_id: String,
    pub(crate) client_secret: Option<String>,
    pub(crate) auth_method: Option<String>,
}

pub(crate) fn registration(body: &[u8]) -> Result<Registration, AuthError> {
    let d = Document::Registration;
    let m = object(d, body)?;
    let client_id = req_str(&m, "client_id", d)?;
    if client_id.is_empty() {
        return Err(malformed(d, "client_id is empty"));
    }
    Ok(Registration {
        client_id,
        client_secret: opt_str(&m, "client_secret", d)?,
        auth_method: opt_str(&m, "token_endpoint_auth_method", d)?,
    })
}

/// A successful token response (RFC 6749 §5.1).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct TokenResponse {
    pub(crate) access_token: String,
    pub(crate) expires_in: Option<Duration>,
    pub(crate) refresh_token: Option<String>,
    pub(crate) scope: Option<String>,
    /// `token_type` is `DPoP`: the token is bound to the proofs' key.
    pub(crate) dpop: bool,
}

impl std::fmt::Debug for TokenResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenResponse")
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// The longest lifetime believed from `expires_in` (ten years): larger values are clamped.
const MAX_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A token response; `dpop`: the client asked for a DPoP-bound token (then `DPoP` is a
/// token type it takes, RFC 9449 §5).
pub(crate) fn token_response(body: &[u8], dpop: bool) -> Result<TokenResponse, AuthError> {
    let d = Document::Token;
    let m = object(d, body)?;
    let access_token = req_str(&m, "access_token", d)?;
    // RFC 6750 §2.1: the token goes in a header; one that cannot is unusable.
    if access_token.is_empty() || http::HeaderValue::from_str(&access_token).is_err() {
        return Err(malformed(
            d,
            "access_token is empty or not a valid header value",
        ));
    }
    let token_type = req_str(&m, "token_type", d)?;
    let bound = dpop && token_type.eq_ignore_ascii_case("dpop");
    if !token_type.eq_ignore_ascii_case("bearer") && !bound {
        return Err(AuthError::UnsupportedTokenType(token_type));
    }
    let expires_in = match m.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_f64() {
            Some(s) if s.is_finite() && s >= 0.0 => {
                Some(Duration::from_secs_f64(s.min(MAX_LIFETIME.as_secs_f64())))
            }
            _ => return Err(malformed(d, "expires_in is not a non-negative number")),
        },
        Some(_) => return Err(malformed(d, "expires_in is not a number")),
    };
    Ok(TokenResponse {
        access_token,
        expires_in,
        refresh_token: opt_str(&m, "refresh_token", d)?.filter(|t| !t.is_empty()),
        scope: opt_str(&m, "scope", d)?,
        dpop: bound,
    })
}

/// The OAuth error object of an error response, as far as it is one (any body is accepted:
/// what is not an error object gives an empty [`OAuthErrorBody`]).
pub(crate) fn error_body(body: &[u8]) -> OAuthErrorBody {
    let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(body) else {
        return OAuthErrorBody::default();
    };
    let s = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_owned);
    OAuthErrorBody {
        error: s("error"),
        error_description: s("error_description"),
        error_uri: s("error_uri"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_metadata_needs_resource_and_servers() {
        let ok = resource_metadata(
            br#"{"resource":"https://r","authorization_servers":["https://as"],"scopes_supported":["a","b"],"x":1}"#,
        )
        .unwrap();
        assert_eq!(ok.authorization_servers, ["https://as"]);
        assert_eq!(
            ok.scopes_supported.as_deref(),
            Some(&["a".into(), "b".into()][..])
        );
        for bad in [
            &br#"{"authorization_servers":["https://as"]}"#[..],
            br#"{"resource":"https://r"}"#,
            br#"{"resource":"https://r","authorization_servers":[]}"#,
            br#"{"resource":"https://r","authorization_servers":[1]}"#,
            br#"{"resource":7,"authorization_servers":["https://as"]}"#,
            br#"[]"#,
            br#"{"#,
        ] {
            assert!(
                matches!(
                    resource_metadata(bad),
                    Err(AuthError::Malformed {
                        document: Document::ResourceMetadata,
                        ..
                    })
                ),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn token_responses_must_be_bearer_with_a_header_safe_token() {
        let t = token_response(
            br#"{"access_token":"abc","token_type":"bearer","expires_in":3600,"refresh_token":"r"}"#,
            false,
        )
        .unwrap();
        assert_eq!(t.expires_in, Some(Duration::from_secs(3600)));
        assert_eq!(t.refresh_token.as_deref(), Some("r"));
        assert!(matches!(
            token_response(br#"{"access_token":"abc","token_type":"DPoP"}"#, false),
            Err(AuthError::UnsupportedTokenType(t)) if t == "DPoP"
        ));
        // Asked for a DPoP-bound token: `DPoP` is taken, and said so; `Bearer` too, unbound.
        let bound = token_response(br#"{"access_token":"abc","token_type":"dpop"}"#, true).unwrap();
        assert!(bound.dpop);
        let plain =
            token_response(br#"{"access_token":"abc","token_type":"Bearer"}"#, true).unwrap();
        assert!(!plain.dpop);
        for bad in [
            &br#"{"token_type":"Bearer"}"#[..],
            br#"{"access_token":"a\nb","token_type":"Bearer"}"#,
            br#"{"access_token":"abc"}"#,
            br#"{"access_token":"abc","token_type":"Bearer","expires_in":-1}"#,
            br#"{"access_token":"abc","token_type":"Bearer","expires_in":"60"}"#,
        ] {
            assert!(
                matches!(token_response(bad, false), Err(AuthError::Malformed { .. })),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let huge = token_response(
            br#"{"access_token":"abc","token_type":"Bearer","expires_in":1e300}"#,
            false,
        )
        .unwrap();
        assert_eq!(huge.expires_in, Some(MAX_LIFETIME));
    }

    #[test]
    fn error_objects_are_read_leniently() {
        let e = error_body(br#"{"error":"invalid_grant","error_description":"expired"}"#);
        assert_eq!(e.error.as_deref(), Some("invalid_grant"));
        assert_eq!(e.error_description.as_deref(), Some("expired"));
        assert_eq!(error_body(b"<html>"), OAuthErrorBody::default());
    }
}
