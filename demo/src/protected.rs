//! The users server behind OAuth 2.1 JWT access tokens (RFC 9068), checked against a JSON Web
//! Key Set (RFC 7517) in the server's asynchronous authentication step
//! (`DriverConfig::with_authenticator`). The `protected` example serves it; the tests
//! run this very code.
//!
//! A request passes when its `Authorization: Bearer` token is a JWT
//!
//! - signed by a key of the set (chosen by the token's `kid`; the algorithm comes from the
//!   key, never from the token, so `alg: none` and HMAC-with-a-public-key are refused),
//! - from the expected `iss`, for this resource (`aud`: the resource URL, RFC 8707),
//! - within `exp` (and `nbf` when present), with a non-empty `sub`,
//! - and granting the scope (`scope`, space-separated).
//!
//! The verdicts: no token — `401` with `WWW-Authenticate: Bearer resource_metadata="…",
//! scope="…"`; a bad token — the same with `error="invalid_token"`; a good token lacking the
//! scope — `403` `error="insufficient_scope"`; a key set that cannot be read — `503` (the
//! token may be fine: a `401` would send the client through authorization again). The
//! principal is the token's `sub`: sessions are bound to it and handlers read it with
//! `RequestContext::principal()` (the `whoami` tool answers it).
//!
//! Keys are read through a [`KeySource`] (a file, a URL, memory: anything that can await),
//! cached, and read again when a token names a key the cache does not hold (key rotation),
//! at most once per [`JwtValidator::refetch_interval`], so a stream of made-up `kid`s costs
//! the key server nothing.
//!
//! **DPoP** ([`JwtValidator::with_dpop`], RFC 9449): a token whose `cnf.jkt` binds it to a
//! key must come as `Authorization: DPoP <token>` with a `DPoP` proof of that key for this
//! request (method, the resource URL, the token's hash, a fresh `jti`, `iat` within the
//! window, the server's nonce when nonces are on), checked by `mcp_driver`'s
//! [`DpopVerifier`]; any failure is `401` with `WWW-Authenticate: DPoP error="…",
//! algs="…"` (and `DPoP-Nonce` when the proof must carry a new nonce). With DPoP required,
//! unbound tokens are refused the same way; a bound token is never accepted as a bearer
//! token.
//!
//! [`DemoIssuer`] stands in for an authorization server, to try all this without one: a P-256
//! key made at startup, its public half as a JWKS, and ES256 tokens signed with it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use mcp_driver::{DpopCheck, DpopVerifier, DriverConfig};
use mcp_proto::server::{AuthDecision, ProtectedResourceMetadata, RequestHead, ServerConfig};
use mcp_service::{CallToolResult, Server, Tool, ToolArgs};
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde::Deserialize;
use serde_json::{Value, json};

/// The scope a token needs by default.
pub const DEFAULT_SCOPE: &str = "mcp";

/// How long the authentication step may take per request (a key set fetch included).
pub const AUTHENTICATION_TIMEOUT: Duration = Duration::from_secs(5);

/// What a token must say.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TokenPolicy {
    /// The `iss` expected: the authorization server's issuer identifier.
    pub issuer: String,
    /// The `aud` expected: this resource's URL (also the protected resource metadata's
    /// `resource`).
    pub audience: String,
    /// The scope every request needs.
    pub scope: String,
    /// Clock skew tolerated on `exp` and `nbf`.
    pub leeway: Duration,
}

impl TokenPolicy {
    /// Tokens from `issuer` for `audience`, with [`DEFAULT_SCOPE`] and a minute of leeway.
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> Self {
        TokenPolicy {
            issuer: issuer.into(),
            audience: audience.into(),
            scope: DEFAULT_SCOPE.to_owned(),
            leeway: Duration::from_secs(60),
        }
    }

    /// Requires `scope` instead.
    pub fn with_scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = scope.into();
        self
    }

    /// Tolerates `leeway` of clock skew instead.
    pub fn with_leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }
}

/// Why a key set could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeySetError {
    /// Not a JSON object with a `keys` array.
    Malformed(String),
    /// No key in it can verify a token (only symmetric, encryption or unsupported keys).
    NoUsableKey,
}

impl fmt::Display for KeySetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySetError::Malformed(e) => write!(f, "not a JWK set: {e}"),
            KeySetError::NoUsableKey => f.write_str("the JWK set holds no usable signing key"),
        }
    }
}

impl std::error::Error for KeySetError {}

struct VerifyingKey {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

/// The verification keys of a JWK set: asymmetric signature keys only (ES256, ES384, RS256,
/// RS384, RS512, PS256, PS384, PS512, EdDSA), each with the one algorithm it verifies.
pub struct KeySet {
    keys: Vec<VerifyingKey>,
}

impl fmt::Debug for KeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.keys.iter().map(|k| (k.kid.as_deref(), k.alg)))
            .finish()
    }
}

/// The algorithm `jwk` verifies, if it is a key this server uses: a public signature key
/// whose declared `alg` (when given) fits its type and curve. Symmetric keys never: a
/// published key set holds no secrets.
fn algorithm_of(jwk: &Jwk) -> Option<Algorithm> {
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return None;
    }
    let declared = jwk.common.key_algorithm;
    Some(match &jwk.algorithm {
        AlgorithmParameters::EllipticCurve(p) => match (&p.curve, declared) {
            (EllipticCurve::P256, None | Some(KeyAlgorithm::ES256)) => Algorithm::ES256,
            (EllipticCurve::P384, None | Some(KeyAlgorithm::ES384)) => Algorithm::ES384,
            _ => return None,
        },
        AlgorithmParameters::RSA(_) => match declared {
            None | Some(KeyAlgorithm::RS256) => Algorithm::RS256,
            Some(KeyAlgorithm::RS384) => Algorithm::RS384,
            Some(KeyAlgorithm::RS512) => Algorithm::RS512,
            Some(KeyAlgorithm::PS256) => Algorithm::PS256,
            Some(KeyAlgorithm::PS384) => Algorithm::PS384,
            Some(KeyAlgorithm::PS512) => Algorithm::PS512,
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(p) => match (&p.curve, declared) {
            (EllipticCurve::Ed25519, None | Some(KeyAlgorithm::EdDSA)) => Algorithm::EdDSA,
            _ => return None,
        },
        _ => return None,
    })
}

impl KeySet {
    /// Parses a JWK set document (`{"keys": [...]}`). Keys this server cannot or must not use
    /// are skipped; a set with none left is an error.
    pub fn from_json(text: &str) -> Result<KeySet, KeySetError> {
        #[derive(Deserialize)]
        struct Document {
            keys: Vec<Value>,
        }
        let doc: Document =
            serde_json::from_str(text).map_err(|e| KeySetError::Malformed(e.to_string()))?;
        let keys: Vec<VerifyingKey> = doc
            .keys
            .into_iter()
            .filter_map(|v| serde_json::from_value::<Jwk>(v).ok())
            .filter_map(|jwk| {
                let alg = algorithm_of(&jwk)?;
                let key = DecodingKey::from_jwk(&jwk).ok()?;
                Some(VerifyingKey {
                    kid: jwk.common.key_id,
                    alg,
                    key,
                })
            })
            .collect();
        if keys.is_empty() {
            return Err(KeySetError::NoUsableKey);
        }
        Ok(KeySet { keys })
    }

    /// How many usable keys the set holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it holds none (never, for a set [`from_json`](Self::from_json) returned).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key named `kid`; a token without a `kid` may use the only key of a one-key set.
    fn find(&self, kid: Option<&str>) -> Option<&VerifyingKey> {
        match kid {
            Some(kid) => self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
            None => match self.keys.as_slice() {
                [only] => Some(only),
                _ => None,
            },
        }
    }
}

/// A key set read: the JWKS document's text, or why it could not be had.
pub type KeySetFuture = Pin<Box<dyn Future<Output = Result<String, String>> + Send>>;

/// Where the key set comes from: anything that can fetch the document (read a file, GET the
/// authorization server's `jwks_uri`, hand over a string held in memory).
pub struct KeySource(Box<dyn Fn() -> KeySetFuture + Send + Sync>);

impl KeySource {
    /// A source that runs `fetch` each time the keys are (re)read.
    pub fn new<F, Fut>(fetch: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, String>> + Send + 'static,
    {
        KeySource(Box::new(move || Box::pin(fetch())))
    }

    /// A document held in memory (parsed like any other).
    pub fn fixed(jwks: impl Into<String>) -> Self {
        let jwks: Arc<str> = jwks.into().into();
        KeySource::new(move || {
            let jwks = jwks.clone();
            async move { Ok(jwks.to_string()) }
        })
    }
}

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeySource")
    }
}

/// The claims this server reads (the others are checked by the JWT library or ignored).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct Claims {
    /// Who the token was issued for: the principal. (Defaulted here so that a token
    /// without one fails the JWT library's required-claim check, which says so.)
    #[serde(default)]
    pub sub: String,
    /// The scopes granted, space-separated.
    #[serde(default)]
    pub scope: Option<String>,
    /// The key the token is bound to (RFC 9449 §6.1: `cnf.jkt`), if it is.
    #[serde(default)]
    pub cnf: Option<Confirmation>,
}

/// A token's `cnf` claim (RFC 7800).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct Confirmation {
    /// The JWK SHA-256 thumbprint of the key the token is bound to (RFC 9449).
    #[serde(default)]
    pub jkt: Option<String>,
}

impl Claims {
    /// Whether the token grants `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scope
            .as_deref()
            .is_some_and(|s| s.split_ascii_whitespace().any(|s| s == scope))
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejection {
    /// No bearer token.
    NoToken,
    /// A token that fails a check (`error="invalid_token"`), and which.
    InvalidToken(&'static str),
    /// A valid token without the scope.
    InsufficientScope,
    /// The key set could not be read, and why (logged, not told to the client).
    Unavailable(String),
}

impl Rejection {
    /// The verdict the server applies.
    pub fn decision(&self, policy: &TokenPolicy) -> AuthDecision {
        match self {
            Rejection::NoToken => AuthDecision::Unauthorized {
                error: None,
                description: None,
                scope: Some(policy.scope.clone()),
            },
            Rejection::InvalidToken(why) => AuthDecision::Unauthorized {
                error: Some("invalid_token".to_owned()),
                description: Some((*why).to_owned()),
                scope: Some(policy.scope.clone()),
            },
            Rejection::InsufficientScope => AuthDecision::InsufficientScope {
                scope: policy.scope.clone(),
                description: Some(format!("the token does not grant {:?}", policy.scope)),
            },
            // Why stays here (it is logged): the peer learns nothing of the key server.
            Rejection::Unavailable(_) => AuthDecision::Unavailable {
                description: Some("the token signing keys cannot be read".to_owned()),
            },
        }
    }
}

/// What the JWT library's refusal means to the client (`error_description`).
fn describe(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ExpiredSignature => "the token has expired",
        ErrorKind::ImmatureSignature => "the token is not valid yet",
        ErrorKind::InvalidAudience => "the token is for another resource",
        ErrorKind::InvalidIssuer => "the token is from another issuer",
        ErrorKind::InvalidSignature => "the token's signature does not verify",
        ErrorKind::InvalidAlgorithm => "the token's algorithm is not its key's",
        ErrorKind::MissingRequiredClaim(_) => "the token lacks a required claim",
        ErrorKind::InvalidClaimFormat(_) => "the token has a malformed claim",
        _ => "the token is malformed",
    }
}

/// The token of an `Authorization: Bearer <token>` header value (the scheme in any case).
pub fn bearer_token(authorization: &str) -> Option<&str> {
    token_of(authorization, "bearer")
}

/// The token of an `Authorization: DPoP <token>` header value (RFC 9449 §7.1).
pub fn dpop_token(authorization: &str) -> Option<&str> {
    token_of(authorization, "dpop")
}

fn token_of<'a>(authorization: &'a str, scheme: &str) -> Option<&'a str> {
    let (s, token) = authorization.trim().split_once(' ')?;
    let token = token.trim();
    (s.eq_ignore_ascii_case(scheme) && !token.is_empty()).then_some(token)
}

#[derive(Default)]
struct Cache {
    keys: Option<Arc<KeySet>>,
    /// When the source was last asked.
    asked: Option<Instant>,
    /// Why that failed, if it did.
    failure: Option<String>,
}

/// Checks JWT access tokens against a [`TokenPolicy`] with keys from a [`KeySource`].
pub struct JwtValidator {
    policy: TokenPolicy,
    source: KeySource,
    refetch_interval: Duration,
    cache: Mutex<Cache>,
    /// DPoP: the proofs' verifier, and whether unbound tokens are refused.
    dpop: Option<(Arc<DpopVerifier>, bool)>,
}

/// What a request shows the validator: its `Authorization` and `DPoP` headers, its method.
#[derive(Debug, Clone, Default)]
pub struct Presented {
    /// The `Authorization` header.
    pub authorization: Option<String>,
    /// The `DPoP` header values.
    pub dpop: Vec<String>,
    /// The method.
    pub method: String,
}

impl fmt::Debug for JwtValidator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwtValidator")
            .field("policy", &self.policy)
            .field("refetch_interval", &self.refetch_interval)
            .finish_non_exhaustive()
    }
}

impl JwtValidator {
    /// The default [`refetch_interval`](Self::refetch_interval).
    pub const DEFAULT_REFETCH_INTERVAL: Duration = Duration::from_secs(30);

    /// A validator for `policy`; the keys are read from `source` on first use.
    pub fn new(policy: TokenPolicy, source: KeySource) -> Self {
        JwtValidator {
            policy,
            source,
            refetch_interval: Self::DEFAULT_REFETCH_INTERVAL,
            cache: Mutex::default(),
            dpop: None,
        }
    }

    /// Accepts DPoP-bound tokens (RFC 9449) with proofs checked by `verifier`; with
    /// `required`, only those (an unbound token is refused with a `DPoP` challenge).
    pub fn with_dpop(mut self, verifier: Arc<DpopVerifier>, required: bool) -> Self {
        self.dpop = Some((verifier, required));
        self
    }

    /// The source is asked at most once per `interval` (default 30 s): when a token names a
    /// key the cached set does not hold, or after a failed read.
    pub fn refetch_interval(mut self, interval: Duration) -> Self {
        self.refetch_interval = interval;
        self
    }

    /// The policy.
    pub fn policy(&self) -> &TokenPolicy {
        &self.policy
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the key set now (e.g. at startup, to fail early); returns how many usable keys
    /// it holds.
    pub async fn load(&self) -> Result<usize, String> {
        self.cache().asked = Some(Instant::now());
        self.fetch().await.map(|k| k.len())
    }

    async fn fetch(&self) -> Result<Arc<KeySet>, String> {
        let read = (self.source.0)().await;
        let parsed = read.and_then(|text| KeySet::from_json(&text).map_err(|e| e.to_string()));
        let mut cache = self.cache();
        match parsed {
            Ok(keys) => {
                let keys = Arc::new(keys);
                cache.keys = Some(keys.clone());
                cache.failure = None;
                Ok(keys)
            }
            Err(e) => {
                cache.failure = Some(e.clone());
                Err(e)
            }
        }
    }

    /// The key set holding `kid`, reading the source again when the cached one does not
    /// (at most once per interval).
    async fn keys_for(&self, kid: Option<&str>) -> Result<Arc<KeySet>, Rejection> {
        let stale = {
            let mut cache = self.cache();
            if let Some(keys) = &cache.keys
                && keys.find(kid).is_some()
            {
                return Ok(keys.clone());
            }
            let may_ask = cache
                .asked
                .is_none_or(|at| at.elapsed() >= self.refetch_interval);
            // (With nothing read yet, a first read may be under way: ask as well.)
            match (may_ask, &cache.keys, &cache.failure) {
                (false, _, Some(why)) => return Err(Rejection::Unavailable(why.clone())),
                (false, Some(_), None) => {
                    return Err(Rejection::InvalidToken("the token's key is unknown"));
                }
                _ => {}
            }
            // Claimed before the read, so concurrent requests do not all ask.
            cache.asked = Some(Instant::now());
            cache.keys.clone()
        };
        match self.fetch().await {
            Ok(keys) if keys.find(kid).is_some() => Ok(keys),
            Ok(_) => Err(Rejection::InvalidToken("the token's key is unknown")),
            // The read failed: the token may well be signed by a key we cannot see.
            Err(why) => match stale {
                Some(keys) if keys.find(kid).is_some() => Ok(keys),
                _ => Err(Rejection::Unavailable(why)),
            },
        }
    }

    /// Checks `token`: its claims when it passes every check of the policy.
    pub async fn verify(&self, token: &str) -> Result<Claims, Rejection> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| Rejection::InvalidToken("the token is malformed"))?;
        let keys = self.keys_for(header.kid.as_deref()).await?;
        let key = keys
            .find(header.kid.as_deref())
            .ok_or(Rejection::InvalidToken("the token's key is unknown"))?;
        // The algorithm is the key's: a token cannot choose it.
        let mut validation = Validation::new(key.alg);
        validation.set_issuer(&[&self.policy.issuer]);
        validation.set_audience(&[&self.policy.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.leeway = self.policy.leeway.as_secs();
        let claims = jsonwebtoken::decode::<Claims>(token, &key.key, &validation)
            .map_err(|e| Rejection::InvalidToken(describe(e.kind())))?
            .claims;
        if claims.sub.is_empty() {
            return Err(Rejection::InvalidToken("the token names no subject"));
        }
        if !claims.has_scope(&self.policy.scope) {
            return Err(Rejection::InsufficientScope);
        }
        Ok(claims)
    }

    /// The verdict on a request whose `Authorization` header is `authorization` (bearer
    /// tokens only: see [`decide_request`](Self::decide_request) for DPoP).
    pub async fn decide(&self, authorization: Option<&str>) -> AuthDecision {
        self.decide_request(Presented {
            authorization: authorization.map(str::to_owned),
            dpop: Vec::new(),
            method: "POST".to_owned(),
        })
        .await
    }

    /// The verdict on a request that `presented` its credentials (see the module docs).
    pub async fn decide_request(&self, presented: Presented) -> AuthDecision {
        let auth = presented.authorization.as_deref();
        let (token, dpop_scheme) = match (auth.and_then(bearer_token), auth.and_then(dpop_token)) {
            (Some(t), _) => (t, false),
            (None, Some(t)) if self.dpop.is_some() => (t, true),
            _ => return self.no_token(),
        };
        let claims = match self.verify(token).await {
            Ok(claims) => claims,
            Err(rejection) => {
                if let Rejection::Unavailable(why) = &rejection {
                    tracing::warn!(error = %why, "the JWT key set cannot be read");
                }
                return rejection.decision(&self.policy);
            }
        };
        let bound = claims.cnf.as_ref().and_then(|c| c.jkt.as_deref());
        let invalid = |why: &str| AuthDecision::DpopUnauthorized {
            error: Some("invalid_token".to_owned()),
            description: Some(why.to_owned()),
            algs: mcp_driver::dpop_algs(),
            nonce: None,
        };
        match (&self.dpop, bound, dpop_scheme) {
            (None, Some(_), _) => {
                Rejection::InvalidToken("DPoP-bound tokens are not accepted here")
                    .decision(&self.policy)
            }
            (Some(_), Some(_), false) => {
                invalid("a DPoP-bound token goes with the DPoP scheme and a proof")
            }
            (Some((verifier, _)), Some(jkt), true) => {
                let proofs: Vec<&str> = presented.dpop.iter().map(String::as_str).collect();
                let check = DpopCheck {
                    proofs: &proofs,
                    method: &presented.method,
                    url: &self.policy.audience,
                    access_token: token,
                    jkt,
                };
                match verifier.check(SystemTime::now(), &check) {
                    Ok(()) => AuthDecision::allow(claims.sub),
                    Err(refusal) => refusal.decision(),
                }
            }
            (_, None, true) => invalid("the token is not DPoP-bound"),
            (Some((_, true)), None, false) => invalid("this server takes DPoP-bound tokens only"),
            (_, None, false) => AuthDecision::allow(claims.sub),
        }
    }

    /// No token: the challenge says which scheme to use (`DPoP`, with a nonce when nonces
    /// are on, when DPoP is required; `Bearer` otherwise).
    fn no_token(&self) -> AuthDecision {
        match &self.dpop {
            Some((verifier, true)) => AuthDecision::DpopUnauthorized {
                error: None,
                description: None,
                algs: mcp_driver::dpop_algs(),
                nonce: verifier.nonce(SystemTime::now()),
            },
            _ => Rejection::NoToken.decision(&self.policy),
        }
    }
}

/// `config` and `driver`, protected by `validator`: the protected resource metadata (in the
/// core's configuration) names the policy's audience as the resource, its issuer as the
/// authorization server and its scope; every request to the endpoint is judged by
/// [`JwtValidator::decide`] in the driver's asynchronous authentication step, bounded by
/// [`AUTHENTICATION_TIMEOUT`].
pub fn protect(
    config: ServerConfig,
    driver: DriverConfig,
    validator: Arc<JwtValidator>,
) -> (ServerConfig, DriverConfig) {
    let policy = validator.policy();
    let metadata = ProtectedResourceMetadata::new(&policy.audience, &policy.issuer)
        .with_scopes([policy.scope.clone()])
        .with_name("users (JWT access tokens)");
    let driver = driver
        .with_authentication_timeout(AUTHENTICATION_TIMEOUT)
        .with_authenticator(move |head: &RequestHead<'_>| {
            let presented = Presented {
                authorization: head
                    .headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
                dpop: head
                    .headers
                    .get_all("dpop")
                    .iter()
                    .filter_map(|v| v.to_str().ok().map(str::to_owned))
                    .collect(),
                method: head.method.as_str().to_owned(),
            };
            let validator = validator.clone();
            async move { validator.decide_request(presented).await }
        });
    (config.with_protected_resource(metadata), driver)
}

/// The users server ([`crate::users::server`]) plus `whoami`, which answers the caller's
/// principal (the token's `sub`).
pub fn server() -> Server {
    crate::users::server().tool(
        Tool::new("whoami").description("Who the access token names (its subject)"),
        |ctx, _args: ToolArgs| async move {
            Ok(CallToolResult::text(ctx.principal().unwrap_or("nobody")))
        },
    )
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A stand-in authorization server for trying the protected server without one: a P-256 key
/// pair made at startup (from the OS's random source), the public half published as a JWKS,
/// ES256 access tokens signed with the private half.
pub struct DemoIssuer {
    issuer: String,
    kid: String,
    key: EncodingKey,
    jwks: String,
}

impl fmt::Debug for DemoIssuer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DemoIssuer")
            .field("issuer", &self.issuer)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl DemoIssuer {
    /// A fresh key with a random key id.
    pub fn generate(issuer: impl Into<String>) -> Result<Self, String> {
        let mut id = [0u8; 9];
        SystemRandom::new()
            .fill(&mut id)
            .map_err(|_| "no random source for a key id".to_owned())?;
        Self::with_kid(issuer, B64.encode(id))
    }

    /// A fresh key named `kid`.
    pub fn with_kid(issuer: impl Into<String>, kid: impl Into<String>) -> Result<Self, String> {
        let kid = kid.into();
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| "cannot generate a P-256 key".to_owned())?;
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(|_| "cannot read the generated key".to_owned())?;
        // The uncompressed SEC1 point: 0x04, then X and Y, 32 bytes each.
        let point = pair.public_key().as_ref();
        let (x, y) = match point {
            [4, xy @ ..] if xy.len() == 64 => xy.split_at(32),
            _ => return Err("unexpected public key encoding".to_owned()),
        };
        let jwks = json!({"keys": [{
            "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": kid,
            "x": B64.encode(x), "y": B64.encode(y),
        }]})
        .to_string();
        Ok(DemoIssuer {
            issuer: issuer.into(),
            kid,
            key: EncodingKey::from_ec_der(pkcs8.as_ref()),
            jwks,
        })
    }

    /// The issuer identifier its tokens carry (`iss`).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The key id its tokens carry (`kid`).
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// Its public key as a JWK set document.
    pub fn jwks(&self) -> &str {
        &self.jwks
    }

    /// The claims of an access token for `subject` to use `audience` with `scope`, valid
    /// from now for `lifetime`.
    pub fn claims(&self, subject: &str, audience: &str, scope: &str, lifetime: Duration) -> Value {
        let now = unix_now();
        json!({
            "iss": self.issuer, "sub": subject, "aud": audience, "scope": scope,
            "iat": now, "nbf": now, "exp": now.saturating_add(lifetime.as_secs()),
        })
    }

    /// `claims` bound to the key whose JWK SHA-256 thumbprint is `jkt` (`cnf.jkt`, for DPoP).
    pub fn bind(mut claims: Value, jkt: &str) -> Value {
        claims["cnf"] = json!({ "jkt": jkt });
        claims
    }

    /// Signs `claims` (ES256, with this key's `kid`, `typ: at+jwt`).
    pub fn sign(&self, claims: &Value) -> Result<String, String> {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        header.typ = Some("at+jwt".to_owned());
        jsonwebtoken::encode(&header, claims, &self.key).map_err(|e| e.to_string())
    }

    /// A signed access token: [`claims`](Self::claims), [`sign`](Self::sign)ed.
    pub fn token(
        &self,
        subject: &str,
        audience: &str,
        scope: &str,
        lifetime: Duration,
    ) -> Result<String, String> {
        self.sign(&self.claims(subject, audience, scope, lifetime))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_sets_keep_only_signature_keys() {
        let demo = DemoIssuer::with_kid("https://as", "k1").unwrap();
        let ec: Value = serde_json::from_str(demo.jwks()).unwrap();
        let ec = ec["keys"][0].clone();
        let mut enc = ec.clone();
        enc["use"] = "enc".into();
        enc["kid"] = "k2".into();
        let mut wrong_alg = ec.clone();
        wrong_alg["alg"] = "ES384".into();
        wrong_alg["kid"] = "k3".into();
        let doc = json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {"kty": "OKP", "crv": "X25519", "x": "AAAA", "kid": "x"},
            {"kty": "nonsense"},
            enc, wrong_alg, ec,
        ]});
        let set = KeySet::from_json(&doc.to_string()).unwrap();
        assert_eq!(set.len(), 1, "{set:?}");
        assert!(set.find(Some("k1")).is_some());
        assert!(set.find(Some("hmac")).is_none());
        assert!(
            set.find(None).is_some(),
            "the only key serves a token without kid"
        );
        assert_eq!(
            KeySet::from_json(r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#).unwrap_err(),
            KeySetError::NoUsableKey
        );
        assert!(matches!(
            KeySet::from_json("[]"),
            Err(KeySetError::Malformed(_))
        ));
    }

    #[test]
    fn bearer_tokens_are_read_in_any_case() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
    }

    #[test]
    fn scopes_are_whole_words() {
        let claims = |scope: Option<&str>| Claims {
            sub: "a".into(),
            scope: scope.map(str::to_owned),
            cnf: None,
        };
        assert!(claims(Some("profile mcp")).has_scope("mcp"));
        assert!(!claims(Some("mcp:read")).has_scope("mcp"));
        assert!(!claims(None).has_scope("mcp"));
    }
}
