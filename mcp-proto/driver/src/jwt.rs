//! [`PrivateKeyJwt`] (feature `jwt`): an [`AssertionSigner`] for `private_key_jwt` client
//! authentication (RFC 7523 §2.2) from a private key the application hands in as PEM. The
//! signing and the JWS encoding are `jsonwebtoken`'s; this adds the claims' times from the
//! system clock (the core passes none) and keeps the key out of the flow.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use mcp_proto::auth::{AssertionClaims, AssertionSigner};

/// How long an assertion is valid by default: 60 s (RFC 7523 §3 asks for a short life).
pub const DEFAULT_ASSERTION_LIFETIME: Duration = Duration::from_secs(60);

/// Signs `private_key_jwt` client assertions with an ES256 or RS256 private key (PEM,
/// PKCS#8; RSA keys also PKCS#1). Give it to
/// [`ClientCredentials::with_private_key_jwt`](mcp_proto::auth::ClientCredentials::with_private_key_jwt).
/// Where the key is stored and how it is rotated is the application's business.
pub struct PrivateKeyJwt {
    key: EncodingKey,
    algorithm: Algorithm,
    key_id: Option<String>,
    lifetime: Duration,
}

impl std::fmt::Debug for PrivateKeyJwt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateKeyJwt")
            .field("algorithm", &self.algorithm)
            .field("key_id", &self.key_id)
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

/// A key [`PrivateKeyJwt`] cannot use.
#[derive(Debug, thiserror::Error)]
pub enum JwtKeyError {
    /// Not `ES256` or `RS256`.
    #[error("unsupported signing algorithm {0:?}: use ES256 or RS256")]
    Algorithm(String),
    /// The PEM does not hold a private key of that algorithm.
    #[error("the private key does not read as {algorithm}: {why}")]
    Key {
        /// The algorithm asked for.
        algorithm: &'static str,
        /// Why.
        why: String,
    },
}

impl PrivateKeyJwt {
    /// A signer with the private key `pem` for `algorithm` (`"ES256"` or `"RS256"`).
    pub fn from_pem(algorithm: &str, pem: &[u8]) -> Result<Self, JwtKeyError> {
        let (algorithm, name, key) = match algorithm {
            "ES256" => (Algorithm::ES256, "ES256", EncodingKey::from_ec_pem(pem)),
            "RS256" => (Algorithm::RS256, "RS256", EncodingKey::from_rsa_pem(pem)),
            other => return Err(JwtKeyError::Algorithm(other.to_owned())),
        };
        let key = key.map_err(|e| JwtKeyError::Key {
            algorithm: name,
            why: e.to_string(),
        })?;
        Ok(PrivateKeyJwt {
            key,
            algorithm,
            key_id: None,
            lifetime: DEFAULT_ASSERTION_LIFETIME,
        })
    }

    /// Names the key (`kid`), for a server that knows several of the client's keys.
    pub fn with_key_id(mut self, kid: impl Into<String>) -> Self {
        self.key_id = Some(kid.into());
        self
    }

    /// Sets how long an assertion is valid (at least 1 s; default 60 s).
    pub fn with_lifetime(mut self, lifetime: Duration) -> Self {
        self.lifetime = lifetime.max(Duration::from_secs(1));
        self
    }
}

#[derive(serde::Serialize)]
struct Claims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    jti: &'a str,
    iat: u64,
    exp: u64,
}

impl AssertionSigner for PrivateKeyJwt {
    fn sign(&self, claims: &AssertionClaims) -> Result<String, String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|_| "the system clock is before 1970".to_owned())?
            .as_secs();
        let body = Claims {
            iss: &claims.client_id,
            sub: &claims.client_id,
            aud: &claims.audience,
            jti: &claims.jwt_id,
            iat: now,
            exp: now.saturating_add(self.lifetime.as_secs()),
        };
        let mut header = Header::new(self.algorithm);
        header.kid.clone_from(&self.key_id);
        jsonwebtoken::encode(&header, &body, &self.key).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{DecodingKey, Validation};

    /// A P-256 key pair (PKCS#8 private, SPKI public), made for this test only.
    const EC_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgFpcpq3y7StJgBEQl
8rk1yAHkq1SYZNGRegE5K9fIEquhRANCAATphBYmyr6P7F5uaXikPSIbesKN7CHH
q5px/NuGOFAyQMkPguAH1XAwbQpn1P8oA2bHG0cH+NvR7M8I6QqRnot/
-----END PRIVATE KEY-----
";
    const EC_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE6YQWJsq+j+xebml4pD0iG3rCjewh
x6uacfzbhjhQMkDJD4LgB9VwMG0KZ9T/KANmxxtHB/jb0ezPCOkKkZ6Lfw==
-----END PUBLIC KEY-----
";

    #[test]
    fn an_es256_assertion_verifies_with_the_public_key_and_carries_the_claims() {
        let signer = PrivateKeyJwt::from_pem("ES256", EC_PRIVATE.as_bytes())
            .unwrap()
            .with_key_id("k1");
        let claims = AssertionClaims::new("cli", "https://as.example", "j1");
        let jwt = signer.sign(&claims).unwrap();
        let key = DecodingKey::from_ec_pem(EC_PUBLIC.as_bytes()).unwrap();
        let mut v = Validation::new(Algorithm::ES256);
        v.set_audience(&["https://as.example"]);
        let got = jsonwebtoken::decode::<serde_json::Value>(&jwt, &key, &v).unwrap();
        assert_eq!(got.header.kid.as_deref(), Some("k1"));
        let c = got.claims;
        assert_eq!(
            (c["iss"].as_str(), c["sub"].as_str()),
            (Some("cli"), Some("cli"))
        );
        assert_eq!(c["jti"], "j1");
        let (iat, exp) = (c["iat"].as_u64().unwrap(), c["exp"].as_u64().unwrap());
        assert_eq!(exp - iat, 60);
        // Another audience does not verify.
        v.set_audience(&["https://other.example"]);
        assert!(jsonwebtoken::decode::<serde_json::Value>(&jwt, &key, &v).is_err());
    }

    #[test]
    fn a_wrong_algorithm_or_key_is_refused_when_built() {
        assert!(matches!(
            PrivateKeyJwt::from_pem("HS256", EC_PRIVATE.as_bytes()),
            Err(JwtKeyError::Algorithm(_))
        ));
        assert!(matches!(
            PrivateKeyJwt::from_pem("RS256", EC_PRIVATE.as_bytes()),
            Err(JwtKeyError::Key { .. })
        ));
        assert!(matches!(
            PrivateKeyJwt::from_pem("ES256", b"not a pem"),
            Err(JwtKeyError::Key { .. })
        ));
    }
}
