//! PKCE (RFC 7636, S256 only), `state`, and client authentication at the token endpoint
//! (RFC 6749 §2.3.1). Hashing is `sha2`'s, encodings `base64`'s and `form_urlencoded`'s.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use sha2::{Digest, Sha256};
use url::form_urlencoded;

use super::error::AuthError;

/// Where the machine gets its random bytes (PKCE verifiers, `state`). The core never reads
/// a random source itself: the driver gives it the operating system's, tests a fixed one.
pub trait Entropy: Send {
    /// Fills `buf` with unpredictable bytes, or says it cannot (then nothing is sent).
    fn fill(&mut self, buf: &mut [u8]) -> bool;
}

impl<F: FnMut(&mut [u8]) -> bool + Send> Entropy for F {
    fn fill(&mut self, buf: &mut [u8]) -> bool {
        self(buf)
    }
}

/// 32 random bytes, base64url without padding: 43 characters of the unreserved set, as
/// RFC 7636 §4.1 recommends for the verifier (and plenty for `state`).
pub(crate) fn random_token(entropy: &mut dyn Entropy) -> Result<String, AuthError> {
    let mut bytes = [0u8; 32];
    if !entropy.fill(&mut bytes) {
        return Err(AuthError::NoRandomness);
    }
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// The S256 challenge of `verifier`: `BASE64URL(SHA256(ASCII(verifier)))` (RFC 7636 §4.2).
pub(crate) fn s256_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// The `Authorization: Basic` value of `client_secret_basic`: the client id and secret,
/// each form-urlencoded, joined by a colon, base64 (RFC 6749 §2.3.1).
pub(crate) fn basic_auth(client_id: &str, secret: &str) -> String {
    let id: String = form_urlencoded::byte_serialize(client_id.as_bytes()).collect();
    let secret: String = form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    format!("Basic {}", STANDARD.encode(format!("{id}:{secret}")))
}

/// Equality that takes the same time wherever the strings differ (for `state`).
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_7636_appendix_b_vector() {
        assert_eq!(
            s256_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn random_tokens_are_43_unreserved_chars_and_need_entropy() {
        let mut n = 0u8;
        let mut counting = |b: &mut [u8]| {
            for x in b.iter_mut() {
                n = n.wrapping_add(1);
                *x = n;
            }
            true
        };
        let t = random_token(&mut counting).unwrap();
        assert_eq!(t.len(), 43);
        assert!(
            t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        let mut none = |_: &mut [u8]| false;
        assert_eq!(random_token(&mut none), Err(AuthError::NoRandomness));
    }

    #[test]
    fn basic_auth_form_encodes_before_base64() {
        // "a b:c" → "a+b" ":" "c%3A" → base64
        assert_eq!(
            basic_auth("a b", "c:"),
            format!("Basic {}", STANDARD.encode("a+b:c%3A"))
        );
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "ab"));
    }
}
