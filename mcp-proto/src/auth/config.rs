//! The configuration of an [`OAuthClient`](super::OAuthClient): who the client is, how it
//! gets its tokens, where it keeps them, and every limit.

use std::time::Duration;

use super::store::{MemoryTokenStore, TokenStore};

/// The URN of the JWT bearer grant (RFC 7523 §2.1).
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// The URN of the token exchange grant (RFC 8693 §2.1).
pub const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The token type of an OpenID Connect ID token (RFC 8693 §3).
pub const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";
/// The token type of an Identity Assertion JWT Authorization Grant (ID-JAG).
pub const ID_JAG_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id-jag";
/// The URN of a JWT client assertion (RFC 7523 §2.2).
pub const JWT_CLIENT_ASSERTION: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// What a client assertion of `private_key_jwt` states (RFC 7523 §3): the flow fills these
/// in; the [`AssertionSigner`] adds the times (`iat`, `exp`) from its clock and signs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AssertionClaims {
    /// `iss` and `sub`: the client's `client_id`.
    pub client_id: String,
    /// `aud`: the authorization server's issuer identifier.
    pub audience: String,
    /// `jti`: 256 random bits, base64url (a server may refuse a repeated one).
    pub jwt_id: String,
}

impl AssertionClaims {
    /// Claims of `client_id` for `audience`, with `jwt_id` (for a signer's own tests; the flow
    /// makes the real ones).
    pub fn new(
        client_id: impl Into<String>,
        audience: impl Into<String>,
        jwt_id: impl Into<String>,
    ) -> Self {
        AssertionClaims {
            client_id: client_id.into(),
            audience: audience.into(),
            jwt_id: jwt_id.into(),
        }
    }
}

/// Signs the client assertions of `private_key_jwt` (RFC 7523 §2.2; OpenID Connect Core
/// §9). The key is the application's: the flow never sees it, only the compact JWS this
/// returns. `mcp-driver`'s `PrivateKeyJwt` signs with an ES256 or RS256 key from PEM.
pub trait AssertionSigner: Send + Sync {
    /// The signed JWT (compact serialization) of `claims`, with `iat` and `exp` from the
    /// signer's clock; `Err` says why it could not sign.
    fn sign(&self, claims: &AssertionClaims) -> Result<String, String>;
}

/// Where the JWT bearer grant's assertion comes from (RFC 7523 §2.1): a workload identity
/// token of the platform (workload identity federation), or a token obtained otherwise.
/// Asked for each token request, since such tokens are short-lived.
pub trait AssertionSource: Send + Sync {
    /// The assertion to present now; `Err` says why there is none.
    fn assertion(&self) -> Result<String, String>;
}

impl<F: Fn() -> Result<String, String> + Send + Sync> AssertionSource for F {
    fn assertion(&self) -> Result<String, String> {
        self()
    }
}

/// How the client authenticates at the token endpoint (RFC 6749 §2.3, RFC 8414 §2
/// `token_endpoint_auth_methods_supported`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TokenAuthMethod {
    /// A public client: `client_id` in the form, no secret.
    None,
    /// HTTP Basic with the form-urlencoded `client_id` and `client_secret` (RFC 6749
    /// §2.3.1).
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the form body (RFC 6749 §2.3.1).
    ClientSecretPost,
    /// A JWT signed with the client's private key (RFC 7523 §2.2): needs an
    /// [`AssertionSigner`] ([`OAuthConfig::with_assertion_signer`]).
    PrivateKeyJwt,
}

impl TokenAuthMethod {
    /// The registered name (`none`, `client_secret_basic`, `client_secret_post`).
    pub fn as_str(self) -> &'static str {
        match self {
            TokenAuthMethod::None => "none",
            TokenAuthMethod::ClientSecretBasic => "client_secret_basic",
            TokenAuthMethod::ClientSecretPost => "client_secret_post",
            TokenAuthMethod::PrivateKeyJwt => "private_key_jwt",
        }
    }

    /// The method a registered name stands for, if this client implements it.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "none" => Some(TokenAuthMethod::None),
            "client_secret_basic" => Some(TokenAuthMethod::ClientSecretBasic),
            "client_secret_post" => Some(TokenAuthMethod::ClientSecretPost),
            "private_key_jwt" => Some(TokenAuthMethod::PrivateKeyJwt),
            _ => None,
        }
    }
}

/// Which OAuth grant obtains the tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Grant {
    /// The authorization code grant with PKCE (OAuth 2.1 §4.1): a person visits the
    /// authorization URL, and the authorization server redirects the user agent to
    /// `redirect_uri`, which must be HTTPS or loopback (`http://localhost`,
    /// `http://127.0.0.1`, `http://[::1]`, any port).
    AuthorizationCode {
        /// The redirect URI, registered with the authorization server.
        redirect_uri: String,
    },
    /// The client credentials grant (OAuth 2.1 §4.2; the MCP "OAuth Client Credentials"
    /// extension): no person involved; needs pre-registered credentials.
    ClientCredentials,
    /// The JWT bearer grant (RFC 7523 §2.1): the client presents an assertion it was given
    /// — a workload identity token of its platform (MCP's workload identity federation
    /// extension), or another issuer's token — and gets an access token for it; no person
    /// involved. Needs pre-registered credentials (the `client_id` the authorization server
    /// knows the workload by). An error of the token endpoint is the flow's error: it is
    /// not retried with the same assertion, and no other grant is tried.
    /// The assertion comes from the configuration's [`AssertionSource`]
    /// ([`OAuthConfig::jwt_bearer`]).
    JwtBearer,
    /// Enterprise-managed authorization (MCP's extension; the ID-JAG profile): the person's
    /// identity token from the enterprise's identity provider is exchanged there (RFC 8693)
    /// for an Identity Assertion JWT Authorization Grant naming this MCP server and its
    /// authorization server, which the client then redeems with the JWT bearer grant at the
    /// authorization server (RFC 7523 §2.1), authenticated with its pre-registered
    /// credentials. No browser: the enterprise's policy at the identity provider decides.
    EnterpriseManaged {
        /// The identity provider.
        idp: IdentityProvider,
    },
}

/// The enterprise's identity provider of [`Grant::EnterpriseManaged`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IdentityProvider {
    /// Its token endpoint (HTTPS, or loopback), where the exchange is posted.
    pub token_endpoint: String,
    /// The client's id at the identity provider (sent as `client_id`), if it has one.
    pub client_id: Option<String>,
}

impl IdentityProvider {
    /// An identity provider whose token endpoint is `token_endpoint` (the person's ID tokens
    /// come from the configuration's [`AssertionSource`]: [`OAuthConfig::enterprise_managed`]).
    pub fn new(token_endpoint: impl Into<String>) -> Self {
        IdentityProvider {
            token_endpoint: token_endpoint.into(),
            client_id: None,
        }
    }

    /// Sets the client's id at the identity provider.
    pub fn with_client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = Some(id.into());
        self
    }
}

/// How the application is deployed, for `application_type` in a registration request
/// (OpenID Connect Dynamic Client Registration 1.0 §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApplicationType {
    /// A native application (loopback or custom redirect URIs).
    Native,
    /// A web application (HTTPS redirect URIs).
    Web,
}

impl ApplicationType {
    /// `native` or `web`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApplicationType::Native => "native",
            ApplicationType::Web => "web",
        }
    }
}

/// What the client says about itself in a dynamic registration (RFC 7591 §2) or a client ID
/// metadata document.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientMetadata {
    /// `client_name`, shown to the person on the consent screen.
    pub client_name: String,
    /// `client_uri`.
    pub client_uri: Option<String>,
    /// `logo_uri`.
    pub logo_uri: Option<String>,
    /// `software_id`.
    pub software_id: Option<String>,
    /// `software_version`.
    pub software_version: Option<String>,
    /// `application_type`; default: `web` for an HTTPS redirect URI not on loopback,
    /// `native` otherwise.
    pub application_type: Option<ApplicationType>,
}

impl ClientMetadata {
    /// Metadata with only a name.
    pub fn new(client_name: impl Into<String>) -> Self {
        ClientMetadata {
            client_name: client_name.into(),
            client_uri: None,
            logo_uri: None,
            software_id: None,
            software_version: None,
            application_type: None,
        }
    }

    /// Sets `client_uri`.
    pub fn with_client_uri(mut self, uri: impl Into<String>) -> Self {
        self.client_uri = Some(uri.into());
        self
    }

    /// Sets `software_id` and `software_version`.
    pub fn with_software(mut self, id: impl Into<String>, version: impl Into<String>) -> Self {
        self.software_id = Some(id.into());
        self.software_version = Some(version.into());
        self
    }

    /// Sets `application_type`.
    pub fn with_application_type(mut self, t: ApplicationType) -> Self {
        self.application_type = Some(t);
        self
    }
}

/// Credentials registered with an authorization server beforehand (MCP authorization,
/// "Preregistration").
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientCredentials {
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`, for a confidential client.
    pub client_secret: Option<String>,
    /// How to authenticate at the token endpoint; default: the first of
    /// `client_secret_basic`, `client_secret_post` the server supports when there is a
    /// secret, `none` otherwise.
    pub auth_method: Option<TokenAuthMethod>,
    /// The issuer the credentials belong to. When set, they are used with that
    /// authorization server only, and a resource that names another one is an error
    /// ([`AuthError::CredentialsForOtherIssuer`](super::AuthError::CredentialsForOtherIssuer)).
    /// When not set, they are used with whichever authorization server the resource names.
    pub issuer: Option<String>,
}

impl std::fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .field("auth_method", &self.auth_method)
            .field("issuer", &self.issuer)
            .finish()
    }
}

impl ClientCredentials {
    /// A public client's id.
    pub fn public(client_id: impl Into<String>) -> Self {
        ClientCredentials {
            client_id: client_id.into(),
            client_secret: None,
            auth_method: None,
            issuer: None,
        }
    }

    /// A confidential client's id and secret.
    pub fn confidential(client_id: impl Into<String>, secret: impl Into<String>) -> Self {
        ClientCredentials {
            client_secret: Some(secret.into()),
            ..ClientCredentials::public(client_id)
        }
    }

    /// Forces a token endpoint authentication method.
    pub fn with_auth_method(mut self, method: TokenAuthMethod) -> Self {
        self.auth_method = Some(method);
        self
    }

    /// Binds the credentials to one issuer.
    pub fn for_issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }
}

/// Every limit of the authorization flow. Each is explicit; the defaults are safe.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuthLimits {
    /// The largest metadata, registration or token response body read (default 128 KiB).
    pub max_document_bytes: usize,
    /// Redirects followed while fetching one metadata document (default 3; token and
    /// registration requests never follow redirects).
    pub max_redirects: u32,
    /// How often one MCP request is re-sent after a fresh authorization before it fails
    /// (default 3; MCP authorization, "Step-Up Authorization Flow": "no more than a few
    /// times").
    pub max_authorization_retries: u32,
    /// How long one metadata, registration or token exchange may take (default 30 s).
    pub request_timeout: Duration,
    /// How long the person may take to complete the authorization in the browser (default
    /// 10 minutes).
    pub authorization_timeout: Duration,
    /// How long before its expiry an access token is refreshed (default 60 s, at most half
    /// its lifetime).
    pub refresh_margin: Duration,
}

impl Default for AuthLimits {
    fn default() -> Self {
        AuthLimits {
            max_document_bytes: 128 * 1024,
            max_redirects: 3,
            max_authorization_retries: 3,
            request_timeout: Duration::from_secs(30),
            authorization_timeout: Duration::from_secs(600),
            refresh_margin: Duration::from_secs(60),
        }
    }
}

/// The configuration of an [`OAuthClient`](super::OAuthClient).
///
/// Client identity follows the priority of the MCP authorization specification (2025-11-25,
/// "Client Registration Approaches"): pre-registered [`credentials`](Self::with_credentials)
/// for the server if given; else the [client ID metadata
/// document](Self::with_client_metadata_document) URL as `client_id` when the authorization
/// server advertises `client_id_metadata_document_supported`; else dynamic client
/// registration (RFC 7591) when it has a `registration_endpoint`.
///
/// **HTTPS rule** (OAuth 2.1 §1.5, MCP authorization "Communication Security"): every URL
/// the flow contacts or opens — protected resource metadata, authorization server metadata,
/// the authorization, token and registration endpoints, redirects followed — must be
/// `https://`, except `http://` to a loopback host (`localhost`, `127.0.0.0/8`, `[::1]`).
/// [`dangerous_allow_http`](Self::dangerous_allow_http) lifts the rule (tests against
/// non-loopback hosts only).
pub struct OAuthConfig {
    pub(crate) grant: Grant,
    pub(crate) metadata: ClientMetadata,
    pub(crate) credentials: Option<ClientCredentials>,
    pub(crate) metadata_document: Option<String>,
    pub(crate) scopes: Vec<String>,
    pub(crate) offline_access: bool,
    pub(crate) store: Box<dyn TokenStore>,
    pub(crate) limits: AuthLimits,
    pub(crate) allow_http: bool,
    pub(crate) legacy_discovery: bool,
    pub(crate) dpop: Option<Box<dyn crate::dpop::DpopSigner>>,
    /// `private_key_jwt`'s signer.
    pub(crate) signer: Option<Box<dyn AssertionSigner>>,
    /// The JWT bearer grant's assertion, or the enterprise grant's ID token.
    pub(crate) assertion: Option<Box<dyn AssertionSource>>,
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("grant", &self.grant)
            .field("metadata", &self.metadata)
            .field("credentials", &self.credentials)
            .field("metadata_document", &self.metadata_document)
            .field("scopes", &self.scopes)
            .field("offline_access", &self.offline_access)
            .field("limits", &self.limits)
            .field("allow_http", &self.allow_http)
            .field("legacy_discovery", &self.legacy_discovery)
            .finish_non_exhaustive()
    }
}

impl OAuthConfig {
    fn with_grant(grant: Grant, metadata: ClientMetadata) -> Self {
        OAuthConfig {
            grant,
            metadata,
            credentials: None,
            metadata_document: None,
            scopes: Vec::new(),
            offline_access: true,
            store: Box::new(MemoryTokenStore::default()),
            limits: AuthLimits::default(),
            allow_http: false,
            legacy_discovery: true,
            dpop: None,
            signer: None,
            assertion: None,
        }
    }

    /// The authorization code grant with PKCE, redirecting to `redirect_uri`.
    pub fn authorization_code(metadata: ClientMetadata, redirect_uri: impl Into<String>) -> Self {
        Self::with_grant(
            Grant::AuthorizationCode {
                redirect_uri: redirect_uri.into(),
            },
            metadata,
        )
    }

    /// The JWT bearer grant (RFC 7523 §2.1) with the assertions of `source` (a workload
    /// identity token, say), for the client `credentials` name (no person involved).
    pub fn jwt_bearer(
        metadata: ClientMetadata,
        credentials: ClientCredentials,
        source: impl AssertionSource + 'static,
    ) -> Self {
        let mut config = Self::with_grant(Grant::JwtBearer, metadata).with_credentials(credentials);
        config.assertion = Some(Box::new(source));
        config
    }

    /// Enterprise-managed authorization ([`Grant::EnterpriseManaged`]): `idp`'s ID-JAG for
    /// this MCP server, for the person whose ID tokens `id_token` gives (asked for each
    /// exchange), redeemed with the client's pre-registered `credentials`.
    pub fn enterprise_managed(
        metadata: ClientMetadata,
        credentials: ClientCredentials,
        idp: IdentityProvider,
        id_token: impl AssertionSource + 'static,
    ) -> Self {
        let mut config = Self::with_grant(Grant::EnterpriseManaged { idp }, metadata)
            .with_credentials(credentials);
        config.assertion = Some(Box::new(id_token));
        config
    }

    /// Authenticates the client with `private_key_jwt` (RFC 7523 §2.2): each token request
    /// carries an assertion `signer` signs (`iss` = `sub` = `client_id`, `aud` = the
    /// authorization server's issuer, a fresh `jti`). The pre-registered credentials' method
    /// becomes `private_key_jwt` unless they name another.
    pub fn with_assertion_signer(mut self, signer: impl AssertionSigner + 'static) -> Self {
        self.signer = Some(Box::new(signer));
        if let Some(c) = self.credentials.as_mut() {
            c.auth_method.get_or_insert(TokenAuthMethod::PrivateKeyJwt);
        }
        self
    }

    /// Asks for DPoP-bound tokens (RFC 9449): every token request carries a proof made by
    /// `signer` (whose key the tokens are then bound to; keep one signer for their life),
    /// and a token the server says is `DPoP` is sent with the `DPoP` scheme and a fresh
    /// proof on every MCP request. A server's `use_dpop_nonce` (the authorization server's
    /// or the MCP server's) is answered once with its nonce, never in a loop.
    pub fn with_dpop(mut self, signer: impl crate::dpop::DpopSigner + 'static) -> Self {
        self.dpop = Some(Box::new(signer));
        self
    }

    /// The client credentials grant with pre-registered `credentials` (no person involved).
    pub fn client_credentials(metadata: ClientMetadata, credentials: ClientCredentials) -> Self {
        Self::with_grant(Grant::ClientCredentials, metadata).with_credentials(credentials)
    }

    /// Pre-registered client credentials.
    pub fn with_credentials(mut self, credentials: ClientCredentials) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// The HTTPS URL of this client's metadata document, used as its `client_id` where the
    /// authorization server supports client ID metadata documents. The document itself
    /// ([`client_metadata_document`](super::OAuthClient::client_metadata_document)) is the
    /// application's to host.
    pub fn with_client_metadata_document(mut self, url: impl Into<String>) -> Self {
        self.metadata_document = Some(url.into());
        self
    }

    /// Scopes always requested, on top of those the scope selection strategy picks (the
    /// challenge's `scope`, else the resource's `scopes_supported`).
    pub fn with_scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Whether to ask for `offline_access` (a refresh token) when the authorization server
    /// lists it in `scopes_supported` (default on; authorization code grant only).
    pub fn with_offline_access(mut self, on: bool) -> Self {
        self.offline_access = on;
        self
    }

    /// Where tokens and dynamic registrations are kept (default: in memory).
    pub fn with_store(mut self, store: impl TokenStore + 'static) -> Self {
        self.store = Box::new(store);
        self
    }

    /// The limits.
    pub fn with_limits(mut self, limits: AuthLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether a resource without protected resource metadata is taken to be its own
    /// authorization server, found at the MCP endpoint's origin (the 2025-03-26 revision's
    /// discovery; default on).
    pub fn with_legacy_discovery(mut self, on: bool) -> Self {
        self.legacy_discovery = on;
        self
    }

    /// Allows `http://` URLs to any host. **Dangerous**: tokens and codes then travel in
    /// clear text; for tests on a private network only.
    pub fn dangerous_allow_http(mut self, allow: bool) -> Self {
        self.allow_http = allow;
        self
    }

    /// The limits in force.
    pub fn limits(&self) -> &AuthLimits {
        &self.limits
    }

    /// The grant.
    pub fn grant(&self) -> &Grant {
        &self.grant
    }
}
