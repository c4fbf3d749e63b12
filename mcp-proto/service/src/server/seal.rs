//! Sealed `requestState` (2026-07-28, multi round-trip requests): the keys that authenticate
//! the state a server hands a client between input rounds.
//!
//! The spec (basic/patterns/mrtr, server requirements) makes `requestState` attacker-controlled
//! input: a server whose state influences what it does must protect its integrity and reject
//! state that fails verification, and should bind it to the principal, give it a short
//! expiry, and tie it to the originating request. A sealed state here is
//!
//! ```text
//! "v1." base64url(payload) "." base64url(HMAC-SHA256(key, "mcp-request-state/v1." base64url(payload)))
//! ```
//!
//! where the payload (JSON, not encrypted: it holds only what the client itself sent, plus
//! the binding fields) names the method, a SHA-256 digest of the request's salient params,
//! the principal, the expiry in Unix seconds and the answers so far. Verification checks the
//! tag first (in constant time, under each accepted key), then the binding.
//!
//! Keys: [`StateKeys::random`] (the default) makes one 32-byte key per process, so a state
//! survives nothing but this process; instances behind a load balancer share a key with
//! [`StateKeys::new`], and a rotation seals with the new key while still accepting the old
//! ones ([`StateKeys::accept`]).

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The shortest key [`StateKeys::new`] takes: 32 bytes, HMAC-SHA256's own output size.
pub const MIN_KEY_LEN: usize = 32;

/// How long a sealed state stays valid by default: long enough for a person to answer an
/// elicitation form, short enough to bound replay.
pub const DEFAULT_STATE_TTL: Duration = Duration::from_secs(30 * 60);

/// At most this many keys are accepted at once (the sealing key included), so verifying a
/// forged state costs a bounded number of MACs.
pub const MAX_KEYS: usize = 8;

const PREFIX: &str = "v1.";
const CONTEXT: &[u8] = b"mcp-request-state/";

/// A key [`StateKeys`] could not take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateKeyError {
    /// Shorter than [`MIN_KEY_LEN`].
    #[error("a requestState key needs at least {MIN_KEY_LEN} bytes, this one has {0}")]
    TooShort(usize),
    /// More than [`MAX_KEYS`] keys.
    #[error("at most {MAX_KEYS} requestState keys can be accepted at once")]
    TooMany,
}

/// The wall clock a seal reads (replaceable in tests).
type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// The keys that seal and open `requestState` (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct StateKeys {
    /// The first key seals; every key opens. Empty only when the process has no random
    /// source: then nothing opens (fail closed).
    keys: Vec<HmacSha256>,
    ttl: Duration,
    clock: Clock,
}

impl std::fmt::Debug for StateKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the keys themselves.
        f.debug_struct("StateKeys")
            .field("keys", &self.keys.len())
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Default for StateKeys {
    fn default() -> Self {
        Self::random()
    }
}

/// This process's random key, `None` when the OS has no random source.
fn process_key() -> Option<&'static [u8; 32]> {
    static KEY: OnceLock<Option<[u8; 32]>> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut key = [0u8; 32];
        match getrandom::fill(&mut key) {
            Ok(()) => Some(key),
            Err(e) => {
                // A guessable key would let clients forge state: fail closed instead (every
                // multi-round request then fails its retry with an invalid requestState).
                tracing::error!(error = %e, "no random source for the requestState key");
                None
            }
        }
    })
    .as_ref()
}

fn mac(key: &[u8]) -> HmacSha256 {
    <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes keys of any length (RFC 2104)")
}

impl StateKeys {
    /// A fresh random key for this process (the default): states verify only here.
    pub fn random() -> Self {
        StateKeys {
            keys: process_key().map(|k| mac(k)).into_iter().collect(),
            ttl: DEFAULT_STATE_TTL,
            clock: Arc::new(SystemTime::now),
        }
    }

    /// Seals with `key` (at least [`MIN_KEY_LEN`] bytes, e.g. from a secret store; every
    /// instance that may receive a retry needs the same one).
    pub fn new(key: impl AsRef<[u8]>) -> Result<Self, StateKeyError> {
        let key = key.as_ref();
        if key.len() < MIN_KEY_LEN {
            return Err(StateKeyError::TooShort(key.len()));
        }
        Ok(StateKeys {
            keys: vec![mac(key)],
            ..Self::random()
        })
    }

    /// Also accepts states sealed with `old` (a key being rotated out); sealing keeps using
    /// the first key.
    pub fn accept(mut self, old: impl AsRef<[u8]>) -> Result<Self, StateKeyError> {
        let old = old.as_ref();
        if old.len() < MIN_KEY_LEN {
            return Err(StateKeyError::TooShort(old.len()));
        }
        if self.keys.len() >= MAX_KEYS {
            return Err(StateKeyError::TooMany);
        }
        self.keys.push(mac(old));
        Ok(self)
    }

    /// How long a sealed state stays valid (default [`DEFAULT_STATE_TTL`]).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The wall clock expiry is measured on (default [`SystemTime::now`]; instances sharing
    /// a key need clocks roughly in step).
    pub fn clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Now, in Unix seconds.
    pub(crate) fn now_secs(&self) -> u64 {
        (self.clock)()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// The expiry of a state sealed now.
    pub(crate) fn expiry(&self) -> u64 {
        self.now_secs().saturating_add(self.ttl.as_secs())
    }

    fn tag(key: &HmacSha256, body: &str) -> HmacSha256 {
        let mut m = key.clone();
        m.update(CONTEXT);
        m.update(PREFIX.as_bytes());
        m.update(body.as_bytes());
        m
    }

    /// Seals `payload` (with no key, the state carries no tag and never opens).
    pub(crate) fn seal(&self, payload: &[u8]) -> String {
        let body = B64.encode(payload);
        let tag = self
            .keys
            .first()
            .map(|k| B64.encode(Self::tag(k, &body).finalize().into_bytes()))
            .unwrap_or_default();
        format!("{PREFIX}{body}.{tag}")
    }

    /// Opens a presented state: its payload when the tag verifies under an accepted key.
    pub(crate) fn open(&self, state: &str) -> Option<Vec<u8>> {
        let rest = state.strip_prefix(PREFIX)?;
        let (body, tag) = rest.split_once('.')?;
        let tag = B64.decode(tag).ok()?;
        let authentic = self
            .keys
            .iter()
            .any(|k| Self::tag(k, body).verify_slice(&tag).is_ok());
        if !authentic {
            return None;
        }
        B64.decode(body).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_opens_and_tampering_does_not() {
        let keys = StateKeys::new([7u8; 32]).unwrap();
        let sealed = keys.seal(b"{\"n\":1}");
        assert_eq!(keys.open(&sealed).as_deref(), Some(&b"{\"n\":1}"[..]));
        // Flip one character of the payload, then of the tag.
        for at in [4, sealed.len() - 2] {
            let mut t = sealed.clone().into_bytes();
            t[at] = if t[at] == b'A' { b'B' } else { b'A' };
            let t = String::from_utf8(t).unwrap();
            assert_eq!(keys.open(&t), None, "tampered at {at}");
        }
        // Another key, no prefix, garbage.
        assert_eq!(StateKeys::new([8u8; 32]).unwrap().open(&sealed), None);
        assert_eq!(keys.open(sealed.trim_start_matches("v1.")), None);
        assert_eq!(keys.open("v1.."), None);
        assert_eq!(keys.open(""), None);
    }

    #[test]
    fn rotation_accepts_old_keys_and_seals_with_the_new_one() {
        let old = StateKeys::new([1u8; 32]).unwrap();
        let rotated = StateKeys::new([2u8; 32])
            .unwrap()
            .accept([1u8; 32])
            .unwrap();
        let from_old = old.seal(b"x");
        assert_eq!(rotated.open(&from_old).as_deref(), Some(&b"x"[..]));
        // New states are sealed with the new key: the old instance cannot open them.
        assert_eq!(old.open(&rotated.seal(b"y")), None);
    }

    #[test]
    fn keys_are_checked() {
        assert_eq!(
            StateKeys::new([0u8; 31]).unwrap_err(),
            StateKeyError::TooShort(31)
        );
        let mut k = StateKeys::new([0u8; 32]).unwrap();
        for i in 1..MAX_KEYS {
            k = k.accept([i as u8; 32]).unwrap();
        }
        assert_eq!(k.accept([9u8; 32]).unwrap_err(), StateKeyError::TooMany);
        // The default is one random key per process: every default opens the others' states.
        let a = StateKeys::random();
        assert_eq!(
            a.open(&StateKeys::random().seal(b"z")).as_deref(),
            Some(&b"z"[..])
        );
        assert_eq!(StateKeys::new([0u8; 32]).unwrap().open(&a.seal(b"z")), None);
    }
}
