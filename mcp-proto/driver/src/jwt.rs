//! Signers of the OAuth flow (feature `jwt`), each keeping its key out of the core:
//!
//! - [`PrivateKeyJwt`]: an [`AssertionSigner`] for `private_key_jwt` client authentication
//!   (RFC 7523 §2.2) from a private key the application hands in as PEM;
//! - [`DpopKey`]: a [`DpopSigner`] of DPoP proofs (RFC 9449 §4), ES256, from a key the
//!   application hands in or a fresh one.
//!
//! The signing and the JWS encoding are `jsonwebtoken`'s (a fresh P-256 key is `p256`'s);
//! these add the claims' times from the system clock and `jti`s from the OS CSPRNG (the core
//! passes neither).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use mcp_proto::auth::{AssertionClaims, AssertionSigner};
use mcp_proto::dpop::{DpopRequest, DpopSigner};
use sha2::Digest as _;

/// How long an assertion is valid by default: 60 s (RFC 7523 §3 asks for a short life).
pub const DEFAULT_ASSERTION_LIFETIME: Duration = Duration::from_secs(60);

/// Signs `private_key_jwt` client assertions with an ES256 or RS256 private key (PEM,
/// PKCS#8; RSA keys also PKCS#1). Give it to
/// [`OAuthConfig::with_assertion_signer`](mcp_proto::auth::OAuthConfig::with_assertion_signer).
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
        let now = unix_now()?;
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

/// `ath`: the access token's SHA-256, base64url (RFC 9449 §4.2); the proofs' signer and
/// their verifier compute it here alike.
pub(crate) fn token_hash(token: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(token.as_bytes()))
}

/// 128 random bits from the OS CSPRNG, base64url (a proof's `jti`, a server nonce).
pub(crate) fn random_id() -> Result<String, String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| format!("no randomness: {e}"))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b))
}

/// Seconds since the Unix epoch, on the system clock.
fn unix_now() -> Result<u64, String> {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .map_err(|_| "the system clock is before 1970".to_owned())
}

/// A DPoP key (ES256) and the proofs it signs (RFC 9449 §4.2): `typ` `dpop+jwt`, the public
/// key as `jwk`, and `jti` (128 random bits), `iat` (the system clock), `htm`, `htu`, `ath`
/// (SHA-256 of the access token, base64url) and `nonce`. Give it to
/// [`OAuthConfig::with_dpop`](mcp_proto::auth::OAuthConfig::with_dpop); the tokens issued
/// are bound to this key, so keep it as long as they live. (A clone is another handle on
/// the same key.)
#[derive(Clone)]
pub struct DpopKey {
    key: EncodingKey,
    jwk: Jwk,
}

impl std::fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpopKey").finish_non_exhaustive()
    }
}

impl DpopKey {
    /// A fresh P-256 key from the OS CSPRNG.
    pub fn generate() -> Result<Self, JwtKeyError> {
        use p256::pkcs8::EncodePrivateKey as _;
        let key = loop {
            let mut bytes = [0u8; 32];
            getrandom::fill(&mut bytes).map_err(|e| JwtKeyError::Key {
                algorithm: "ES256",
                why: format!("no randomness: {e}"),
            })?;
            // Out of the curve's range once in about 2^128 draws: draw again.
            if let Ok(k) = p256::SecretKey::from_slice(&bytes) {
                break k;
            }
        };
        let der = key.to_pkcs8_der().map_err(|e| JwtKeyError::Key {
            algorithm: "ES256",
            why: e.to_string(),
        })?;
        Self::from_key(EncodingKey::from_ec_der(der.as_bytes()))
    }

    /// The P-256 private key `pem` (PKCS#8).
    pub fn from_pem(pem: &[u8]) -> Result<Self, JwtKeyError> {
        let key = EncodingKey::from_ec_pem(pem).map_err(|e| JwtKeyError::Key {
            algorithm: "ES256",
            why: e.to_string(),
        })?;
        Self::from_key(key)
    }

    fn from_key(key: EncodingKey) -> Result<Self, JwtKeyError> {
        let jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).map_err(|e| JwtKeyError::Key {
            algorithm: "ES256",
            why: e.to_string(),
        })?;
        Ok(DpopKey { key, jwk })
    }

    /// The JWK SHA-256 thumbprint of the public key (RFC 7638): the `cnf.jkt` of the tokens
    /// bound to it.
    pub fn thumbprint(&self) -> String {
        self.jwk
            .thumbprint(jsonwebtoken::jwk::ThumbprintHash::SHA256)
            .unwrap_or_default()
    }
}

#[derive(serde::Serialize)]
struct ProofClaims<'a> {
    jti: String,
    htm: &'a str,
    htu: &'a str,
    iat: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    ath: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nonce: Option<&'a str>,
}

impl DpopSigner for DpopKey {
    fn proof(&self, request: &DpopRequest<'_>) -> Result<String, String> {
        let claims = ProofClaims {
            jti: random_id()?,
            htm: request.method,
            htu: request.url,
            iat: unix_now()?,
            ath: request.access_token.map(token_hash),
            nonce: request.nonce,
        };
        let mut header = Header::new(Algorithm::ES256);
        header.typ = Some("dpop+jwt".into());
        header.jwk = Some(self.jwk.clone());
        jsonwebtoken::encode(&header, &claims, &self.key).map_err(|e| e.to_string())
    }

    fn clone_box(&self) -> Box<dyn DpopSigner> {
        Box::new(self.clone())
    }
}

/// A P-256 test key (PKCS#8), made for these tests only.
#[cfg(test)]
pub(crate) mod tests_key {
    pub(crate) const EC_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgFpcpq3y7StJgBEQl
8rk1yAHkq1SYZNGRegE5K9fIEquhRANCAATphBYmyr6P7F5uaXikPSIbesKN7CHH
q5px/NuGOFAyQMkPguAH1XAwbQpn1P8oA2bHG0cH+NvR7M8I6QqRnot/
-----END PRIVATE KEY-----
";
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{DecodingKey, Validation};

    use super::tests_key::EC_PRIVATE;
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
    fn a_dpop_proof_verifies_with_its_own_jwk_and_binds_the_request_and_token() {
        for key in [
            DpopKey::generate().unwrap(),
            DpopKey::from_pem(EC_PRIVATE.as_bytes()).unwrap(),
        ] {
            let request = DpopRequest {
                method: "POST",
                url: "https://mcp.example/mcp",
                access_token: Some("tok"),
                nonce: Some("n1"),
            };
            let a = key.proof(&request).unwrap();
            let b = key.proof(&request).unwrap();
            let header = jsonwebtoken::decode_header(&a).unwrap();
            assert_eq!(header.typ.as_deref(), Some("dpop+jwt"));
            assert_eq!(header.alg, Algorithm::ES256);
            let jwk = header.jwk.expect("the public key in the header");
            assert_eq!(
                jwk.thumbprint(jsonwebtoken::jwk::ThumbprintHash::SHA256)
                    .unwrap(),
                key.thumbprint()
            );
            let mut v = Validation::new(Algorithm::ES256);
            v.required_spec_claims.clear();
            v.validate_exp = false;
            let decoding = DecodingKey::from_jwk(&jwk).unwrap();
            let c = jsonwebtoken::decode::<serde_json::Value>(&a, &decoding, &v)
                .unwrap()
                .claims;
            assert_eq!(
                (c["htm"].as_str(), c["htu"].as_str()),
                (Some("POST"), Some("https://mcp.example/mcp"))
            );
            assert_eq!(c["nonce"], "n1");
            // ath = BASE64URL(SHA-256("tok")), as `openssl dgst -sha256` computes it.
            assert_eq!(c["ath"], "GnZ0607njffhrEOak8P6jjyUV4TU3sn9jjARc4svHWI");
            let c2 = jsonwebtoken::decode::<serde_json::Value>(&b, &decoding, &v)
                .unwrap()
                .claims;
            assert_ne!(c["jti"], c2["jti"], "every proof is fresh");
            // A token request's proof has no ath; no nonce, none.
            let t = key
                .proof(&DpopRequest {
                    access_token: None,
                    nonce: None,
                    ..request
                })
                .unwrap();
            let c = jsonwebtoken::decode::<serde_json::Value>(&t, &decoding, &v)
                .unwrap()
                .claims;
            assert!(c.get("ath").is_none() && c.get("nonce").is_none());
        }
        assert_ne!(
            DpopKey::generate().unwrap().thumbprint(),
            DpopKey::generate().unwrap().thumbprint()
        );
    }

    /// An RSA-2048 key pair (PKCS#8 private, SPKI public), made for this test only.
    const RSA_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC6I5W8etiDKHwP
2FULz33MN0U8XG1W/Epv89jhBW0FcV8Ytw9pkZdgEAkSQ/YlLjXLxKD8CW4OOoiY
RGPVJMtbz5LipNYRWjXVa+KW7XYH1PfGhX34XcRzeWBV8VK/gKGxYfRNZhqFDhda
v7mQOay87KO8e87+90kpmKlFWTBgGzaxQ0pqClsRg9TaMS3Ei9DBkNzbpMSohBVj
oyvZ0BsK6e9fJbEEp2o07fFaQeO72tWH0Pu60NRbtlxvc+DaJENSfz/fMbzEXEZr
yJqqiw8zZ4Jgytcie17vdTFTtDiNWV+xIGfF/4ed5BwyeFTAKMCTIRMFY57tfNDe
fCpySK6nAgMBAAECggEABD96AVaTbl6br56IoHR+BaQkVAGeGtVF93/dvAuC1Nfo
sPl300hbqzVyeedp+dWZb8FnuqfSjhqxDA1CkQ7Q2YQhrXBXto5fMRXuRy8GvX5P
kUkXkN9dTeew/DJM4UMgBCIVckewAwPu9TfRu7kAh1+1R7k0javgPZEEGguHJc4R
ELY9VlOBVpzsqei3lo6DRzi0kPEyrDGRvw1H1MifuD0EqyyHLICIn+aBMTQknIUV
sG3TEMjVjm1Bz5J4lc+n09M5zIH9rTr9saEkPTUtmyc4yPaiPOcNoSGLP8QLF1Y4
SJzDSii2gYitK7/U41+n0SHRjI39+p/I91jAdOnmUQKBgQDu7sXFHBIzj8qilyHf
DBc+tV5nMGBosbx2kn73RIvYCzdB7sFBVDVWfcXVamx8rV+PbFsHTNnabv+na7Rs
o/F1FbZJHiHLMDN5Azxy33WtFU+KTV0Qwp85vaU3XnvSMmqkrlBM9HSB8WGA09Vu
IuK5oB/Y4b0yY248exABlRfmxQKBgQDHb2dcnJ7nnMM1FFPRksg6J8mVOTEYAWkw
UgCxpGRf2Suvj4+M2jL6AcWYAn5SdsMQ+ACfjJHfAeEYRK5pT0SWgcZexDMH4fmL
Rf2WullOfOCK9niGE4WGr5Z7IhsOAAL+JVRhZswNFQ9Nq06Zdw+3MXipwSN2kAmn
43XwhJZ2ewKBgBOjxtfj7c8VM7fXqm4WJVb/O4pJ3LLeYTpx4kPa+4+/pEQkJviC
vnukjP106QP6kE9OvdDEzWd6FkOhw8vmUfOo3Dn4Yxi7lo+M54wduCOJC+e3Yj39
cW8impEJkC3//OoadflNYsJHoBch0npiHbbaZaPDMnUQ3T/VccRfh/5tAoGAeAQ7
sIj0O6+j7bpo4pKxegXdkraTK74VniWLE1w5p1CasJD1My9QRBFy5pKBkIC1zO1h
+qHuWsTXv/H8/5TbUrOQPBFYIGNF+CFLhTxpaAlQW3ANgaoXzcC3DyysGVW6d1Th
nafuHeVRi00PBN2YkIbt9UIsZDo0BVul6vLvVScCgYEA1bWLepdbI1QRyRItXkoT
fweUvp4PdoEQ24o+gwyd+63aaSOFRNNezAcznZYgr2czbQudJratK/NluF6Zh5LC
QhiXQ/oZ/QSiSOrBSpUKet4SWqagih+CWw/QEGlTnb7cgUMnfVN0B1/hEcXRRd/o
sZsLBSYNpF72qOq5Rh8BpZM=
-----END PRIVATE KEY-----
";
    const RSA_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAuiOVvHrYgyh8D9hVC899
zDdFPFxtVvxKb/PY4QVtBXFfGLcPaZGXYBAJEkP2JS41y8Sg/AluDjqImERj1STL
W8+S4qTWEVo11Wvilu12B9T3xoV9+F3Ec3lgVfFSv4ChsWH0TWYahQ4XWr+5kDms
vOyjvHvO/vdJKZipRVkwYBs2sUNKagpbEYPU2jEtxIvQwZDc26TEqIQVY6Mr2dAb
CunvXyWxBKdqNO3xWkHju9rVh9D7utDUW7Zcb3Pg2iRDUn8/3zG8xFxGa8iaqosP
M2eCYMrXInte73UxU7Q4jVlfsSBnxf+HneQcMnhUwCjAkyETBWOe7XzQ3nwqckiu
pwIDAQAB
-----END PUBLIC KEY-----
";

    #[test]
    fn an_rs256_assertion_verifies_with_the_public_key() {
        let signer = PrivateKeyJwt::from_pem("RS256", RSA_PRIVATE.as_bytes()).unwrap();
        let jwt = signer
            .sign(&AssertionClaims::new("cli", "https://as.example", "j2"))
            .unwrap();
        let key = DecodingKey::from_rsa_pem(RSA_PUBLIC.as_bytes()).unwrap();
        let mut v = Validation::new(Algorithm::RS256);
        v.set_audience(&["https://as.example"]);
        let got = jsonwebtoken::decode::<serde_json::Value>(&jwt, &key, &v).unwrap();
        assert_eq!(got.header.alg, Algorithm::RS256);
        assert_eq!(got.claims["sub"], "cli");
        // The EC key's public half does not verify it.
        let ec = DecodingKey::from_ec_pem(EC_PUBLIC.as_bytes()).unwrap();
        assert!(jsonwebtoken::decode::<serde_json::Value>(&jwt, &ec, &v).is_err());
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
