//! [`DpopVerifier`] (feature `jwt`): a protected MCP server's check of DPoP proofs
//! (RFC 9449 §4.3, §7.1) for DPoP-bound access tokens, with a bounded replay cache and
//! rotating server nonces (§8, §9). Time is passed in ([`DpopVerifier::check`]'s `now`), so
//! the cache and the nonces are tested on a virtual clock; the signature and the JWK are
//! `jsonwebtoken`'s.
//!
//! # Theory of operation
//!
//! The access token has been validated by the server's own means (a JWT's signature,
//! issuer, audience, lifetime; introspection) and found bound to a key: its `cnf.jkt`, the
//! key's RFC 7638 thumbprint. The request then carries exactly one `DPoP` proof, checked in
//! this order, the first failure refusing the request with `401`, `WWW-Authenticate: DPoP`
//! (`error`, `algs`) and, when nonces are on, a `DPoP-Nonce`:
//!
//! ```text
//!  check                                                     refusal
//!  --------------------------------------------------------  ------------------------------
//!  one proof, a JWS with typ dpop+jwt, an accepted alg,      invalid_dpop_proof
//!    a public jwk (no private part)
//!  the signature verifies with that jwk                      invalid_dpop_proof
//!  htm is the request's method, htu its URL (no query)       invalid_dpop_proof
//!  iat within max_skew of now                                invalid_dpop_proof
//!  ath is the token's SHA-256                                invalid_dpop_proof
//!  the jwk's thumbprint is the token's cnf.jkt               invalid_token
//!  (nonces on) nonce is the current or the previous one      use_dpop_nonce (+ DPoP-Nonce)
//!  jti not seen within the replay window                     invalid_dpop_proof
//! ```
//!
//! **Replays.** A proof's `jti` is remembered until its `iat` leaves the window
//! (`iat + max_skew`); a proof whose `iat` is older is refused anyway. At most
//! `replay_capacity` are remembered: when full, the oldest is forgotten (its window may not
//! have passed: size the capacity above the proofs one window sees). **Nonces.** The current
//! nonce (128 random bits) is replaced every `nonce_period`; the previous one stays accepted
//! for one more period, so a client whose nonce just rotated is not refused twice.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use jsonwebtoken::jwk::{Jwk, ThumbprintHash};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use mcp_proto::server::AuthDecision;

/// The proof algorithms accepted (asymmetric only, RFC 9449 §4.2).
pub const DPOP_ALGORITHMS: [Algorithm; 5] = [
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::RS256,
    Algorithm::PS256,
    Algorithm::EdDSA,
];

/// The limits of a [`DpopVerifier`], with safe defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DpopPolicy {
    /// How far a proof's `iat` may be from now, either way (the replay window). Default
    /// 60 s.
    pub max_skew: Duration,
    /// `jti`s remembered at most. Default 65,536.
    pub replay_capacity: usize,
    /// Proofs must carry the server's nonce. Default off.
    pub require_nonce: bool,
    /// How long a nonce is the current one. Default 5 min.
    pub nonce_period: Duration,
}

impl Default for DpopPolicy {
    fn default() -> Self {
        DpopPolicy {
            max_skew: Duration::from_secs(60),
            replay_capacity: 65_536,
            require_nonce: false,
            nonce_period: Duration::from_secs(300),
        }
    }
}

impl DpopPolicy {
    /// Proofs must carry the server's nonce, rotated every `period`.
    pub fn with_nonces(mut self, period: Duration) -> Self {
        self.require_nonce = true;
        self.nonce_period = period.max(Duration::from_secs(1));
        self
    }

    /// Sets [`max_skew`](Self::max_skew) (at least 1 s).
    pub fn with_max_skew(mut self, skew: Duration) -> Self {
        self.max_skew = skew.max(Duration::from_secs(1));
        self
    }

    /// Sets [`replay_capacity`](Self::replay_capacity) (at least 1).
    pub fn with_replay_capacity(mut self, n: usize) -> Self {
        self.replay_capacity = n.max(1);
        self
    }
}

/// The request a proof must match.
#[derive(Debug, Clone, Copy)]
pub struct DpopCheck<'a> {
    /// The `DPoP` header values (exactly one is accepted).
    pub proofs: &'a [&'a str],
    /// The request's method.
    pub method: &'a str,
    /// The request's URL as the client addressed it (the resource's public URL).
    pub url: &'a str,
    /// The access token the request carries.
    pub access_token: &'a str,
    /// The token's `cnf.jkt`.
    pub jkt: &'a str,
}

/// Why a proof was refused; [`decision`](Self::decision) is the 401 to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpopRefusal {
    /// `invalid_dpop_proof`, `invalid_token` or `use_dpop_nonce`.
    pub error: &'static str,
    /// What was wrong (`error_description`).
    pub description: &'static str,
    /// The nonce the next proof must carry (nonces on).
    pub nonce: Option<String>,
}

impl DpopRefusal {
    /// The verdict: `401`, `WWW-Authenticate: DPoP` with the error and the algorithms, and
    /// the nonce in `DPoP-Nonce`.
    pub fn decision(&self) -> AuthDecision {
        AuthDecision::DpopUnauthorized {
            error: Some(self.error.to_owned()),
            description: Some(self.description.to_owned()),
            algs: dpop_algs(),
            nonce: self.nonce.clone(),
        }
    }
}

/// `algs` of the challenge: the accepted algorithms, space-separated.
pub fn dpop_algs() -> String {
    DPOP_ALGORITHMS
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(serde::Deserialize)]
struct ProofClaims {
    jti: String,
    htm: String,
    htu: String,
    iat: i64,
    #[serde(default)]
    ath: Option<String>,
    #[serde(default)]
    nonce: Option<String>,
}

struct Nonces {
    current: String,
    previous: Option<String>,
    since: u64,
}

struct State {
    /// jti → when it may be forgotten (unix seconds).
    seen: HashMap<String, u64>,
    /// The order they were seen in (for eviction).
    order: VecDeque<String>,
    nonces: Option<Nonces>,
}

/// Checks DPoP proofs for bound tokens (see the module docs). Share one per server: the
/// replay cache and the nonces are its.
pub struct DpopVerifier {
    policy: DpopPolicy,
    state: Mutex<State>,
}

impl std::fmt::Debug for DpopVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpopVerifier")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A new nonce at `now` (seconds). A nonce proves freshness, not a secret: should the OS
/// refuse randomness, the time (passed in, like every time here) still changes it.
fn fresh_nonce(now: u64) -> String {
    crate::jwt::random_id().unwrap_or_else(|_| format!("t{now}"))
}

impl DpopVerifier {
    /// A verifier with `policy`.
    pub fn new(policy: DpopPolicy) -> Self {
        DpopVerifier {
            policy,
            state: Mutex::new(State {
                seen: HashMap::new(),
                order: VecDeque::new(),
                nonces: None,
            }),
        }
    }

    /// The policy.
    pub fn policy(&self) -> &DpopPolicy {
        &self.policy
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The nonce proofs must carry now (rotated every `nonce_period`); `None` when nonces
    /// are off.
    pub fn nonce(&self, now: SystemTime) -> Option<String> {
        if !self.policy.require_nonce {
            return None;
        }
        let mut st = self.lock();
        Some(
            Self::rotate(&mut st, &self.policy, secs(now))
                .current
                .clone(),
        )
    }

    fn rotate<'a>(st: &'a mut State, policy: &DpopPolicy, now: u64) -> &'a Nonces {
        let period = policy.nonce_period.as_secs().max(1);
        let due = match &st.nonces {
            None => true,
            Some(n) => now >= n.since.saturating_add(period),
        };
        if due {
            let previous = st.nonces.take().map(|n| n.current);
            st.nonces = Some(Nonces {
                current: fresh_nonce(now),
                previous,
                since: now,
            });
        }
        st.nonces.as_ref().expect("set above")
    }

    /// A refusal of the current policy (with the nonce, when nonces are on).
    fn refuse(
        &self,
        now: SystemTime,
        error: &'static str,
        description: &'static str,
    ) -> DpopRefusal {
        DpopRefusal {
            error,
            description,
            nonce: self.nonce(now),
        }
    }

    /// Checks the proof of one request at `now` (see the module docs' table).
    pub fn check(&self, now: SystemTime, c: &DpopCheck<'_>) -> Result<(), DpopRefusal> {
        self.verify(
            now,
            c.proofs,
            c.method,
            c.url,
            Some((c.access_token, c.jkt)),
        )
        .map(|_| ())
    }

    /// Checks the proof of a token request (RFC 9449 §5: no token yet, so no `ath` and no
    /// binding to compare) at `now`: the JWK SHA-256 thumbprint of its key, the `cnf.jkt`
    /// of the token to issue. For an authorization server; the nonce and replay rules are
    /// the same.
    pub fn check_token_request(
        &self,
        now: SystemTime,
        proofs: &[&str],
        url: &str,
    ) -> Result<String, DpopRefusal> {
        self.verify(now, proofs, "POST", url, None)
    }

    /// The checks of the table; `bound`: the access token and its `cnf.jkt`. The key's
    /// thumbprint when they pass.
    fn verify(
        &self,
        now: SystemTime,
        proofs: &[&str],
        method: &str,
        url: &str,
        bound: Option<(&str, &str)>,
    ) -> Result<String, DpopRefusal> {
        Self::forget_expired(&mut self.lock(), secs(now));
        let bad = |d| self.refuse(now, "invalid_dpop_proof", d);
        let proof = match proofs {
            [one] if !one.contains(',') => *one,
            [] => return Err(bad("the request carries no DPoP proof")),
            _ => return Err(bad("the request carries more than one DPoP proof")),
        };
        let header =
            jsonwebtoken::decode_header(proof).map_err(|_| bad("the DPoP proof is not a JWS"))?;
        if header.typ.as_deref() != Some("dpop+jwt") {
            return Err(bad("the DPoP proof's typ is not dpop+jwt"));
        }
        if !DPOP_ALGORITHMS.contains(&header.alg) {
            return Err(bad("the DPoP proof's algorithm is not accepted"));
        }
        let jwk: Jwk = header
            .jwk
            .ok_or_else(|| bad("the DPoP proof carries no jwk"))?;
        if has_private_part(proof) {
            return Err(bad("the DPoP proof's jwk holds a private key"));
        }
        let key =
            DecodingKey::from_jwk(&jwk).map_err(|_| bad("the DPoP proof's jwk is unusable"))?;
        let mut validation = Validation::new(header.alg);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_aud = false;
        let claims = jsonwebtoken::decode::<ProofClaims>(proof, &key, &validation)
            .map_err(|_| bad("the DPoP proof's signature or claims are invalid"))?
            .claims;
        if !claims.htm.eq_ignore_ascii_case(method) {
            return Err(bad("the DPoP proof is for another method (htm)"));
        }
        if mcp_proto::dpop::htu(&claims.htu) != mcp_proto::dpop::htu(url) {
            return Err(bad("the DPoP proof is for another URL (htu)"));
        }
        let t = i64::try_from(secs(now)).unwrap_or(i64::MAX);
        let skew = i64::try_from(self.policy.max_skew.as_secs()).unwrap_or(i64::MAX);
        if claims.iat.abs_diff(t) > skew.unsigned_abs() {
            return Err(bad("the DPoP proof's iat is outside the accepted window"));
        }
        let ath = bound.map(|(token, _)| crate::jwt::token_hash(token));
        if claims.ath != ath {
            return Err(bad("the DPoP proof is for another access token (ath)"));
        }
        let thumbprint = jwk
            .thumbprint(ThumbprintHash::SHA256)
            .map_err(|_| bad("the DPoP proof's jwk is unusable"))?;
        if bound.is_some_and(|(_, jkt)| thumbprint != jkt) {
            return Err(self.refuse(
                now,
                "invalid_token",
                "the access token is bound to another key (cnf.jkt)",
            ));
        }
        let mut st = self.lock();
        if self.policy.require_nonce {
            let n = Self::rotate(&mut st, &self.policy, secs(now));
            let ok = claims
                .nonce
                .as_deref()
                .is_some_and(|x| x == n.current || n.previous.as_deref() == Some(x));
            if !ok {
                return Err(DpopRefusal {
                    error: "use_dpop_nonce",
                    description: "the DPoP proof must carry the server's nonce",
                    nonce: Some(n.current.clone()),
                });
            }
        }
        // The replay cache: the oldest goes beyond capacity.
        let now_s = secs(now);
        while st.order.len() >= self.policy.replay_capacity {
            if let Some(j) = st.order.pop_front() {
                st.seen.remove(&j);
            }
        }
        if st.seen.contains_key(&claims.jti) {
            drop(st);
            return Err(bad("the DPoP proof was used before (jti)"));
        }
        let until = u64::try_from(claims.iat.max(0))
            .unwrap_or(0)
            .saturating_add(self.policy.max_skew.as_secs())
            .max(now_s.saturating_add(1));
        st.seen.insert(claims.jti.clone(), until);
        st.order.push_back(claims.jti);
        Ok(thumbprint)
    }
}

impl DpopVerifier {
    /// Drops the `jti`s whose window has passed (oldest first; a later one may expire sooner
    /// and waits behind it, which only keeps it longer).
    fn forget_expired(st: &mut State, now: u64) {
        while let Some(front) = st.order.front() {
            if st.seen.get(front).is_some_and(|until| *until > now) {
                break;
            }
            if let Some(j) = st.order.pop_front() {
                st.seen.remove(&j);
            }
        }
    }
}

/// Whether the proof's header `jwk` has a private member (`d`, or an RSA private part).
fn has_private_part(proof: &str) -> bool {
    let Some(head) = proof.split('.').next() else {
        return true;
    };
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(head) else {
        return true;
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return true;
    };
    let jwk = &v["jwk"];
    ["d", "p", "q", "dp", "dq", "qi", "k"]
        .iter()
        .any(|m| jwk.get(m).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jwt::DpopKey;
    use jsonwebtoken::{EncodingKey, Header};
    use mcp_proto::dpop::{DpopRequest, DpopSigner};

    const URL: &str = "https://mcp.example/mcp";
    const TOKEN: &str = "the-access-token";

    fn proof(key: &DpopKey, method: &str, url: &str, token: &str, nonce: Option<&str>) -> String {
        key.proof(&DpopRequest {
            method,
            url,
            access_token: Some(token),
            nonce,
        })
        .unwrap()
    }

    fn check(v: &DpopVerifier, now: SystemTime, p: &str, jkt: &str) -> Result<(), DpopRefusal> {
        v.check(
            now,
            &DpopCheck {
                proofs: &[p],
                method: "POST",
                url: URL,
                access_token: TOKEN,
                jkt,
            },
        )
    }

    /// A proof signed by hand: `header` and `claims` as given (for what DpopKey never makes).
    fn forged(header: Header, claims: serde_json::Value) -> String {
        let key = EncodingKey::from_ec_pem(crate::jwt::tests_key::EC_PRIVATE.as_bytes()).unwrap();
        jsonwebtoken::encode(&header, &claims, &key).unwrap()
    }

    #[test]
    fn a_good_proof_passes_once_and_every_mismatch_is_refused() {
        let v = DpopVerifier::new(DpopPolicy::default());
        let key = DpopKey::generate().unwrap();
        let jkt = key.thumbprint();
        let now = SystemTime::now();
        let good = proof(&key, "POST", URL, TOKEN, None);
        assert_eq!(check(&v, now, &good, &jkt), Ok(()));
        let replay = check(&v, now, &good, &jkt).unwrap_err();
        assert_eq!(replay.description, "the DPoP proof was used before (jti)");
        // A query on the request URL does not matter (htu has none).
        let p = proof(&key, "POST", URL, TOKEN, None);
        let ok = v.check(
            now,
            &DpopCheck {
                proofs: &[&p],
                method: "POST",
                url: "https://mcp.example/mcp?x=1",
                access_token: TOKEN,
                jkt: &jkt,
            },
        );
        assert_eq!(ok, Ok(()));
        let other = DpopKey::generate().unwrap();
        let cases: Vec<(String, &str, &str)> = vec![
            (
                proof(&key, "GET", URL, TOKEN, None),
                "invalid_dpop_proof",
                "htm",
            ),
            (
                proof(&key, "POST", "https://evil.example/mcp", TOKEN, None),
                "invalid_dpop_proof",
                "htu",
            ),
            (
                proof(&key, "POST", URL, "another-token", None),
                "invalid_dpop_proof",
                "ath",
            ),
            (
                proof(&other, "POST", URL, TOKEN, None),
                "invalid_token",
                "cnf.jkt",
            ),
            ("not.a.jws".into(), "invalid_dpop_proof", "JWS"),
        ];
        for (p, error, why) in cases {
            let r = check(&v, now, &p, &jkt).unwrap_err();
            assert_eq!(r.error, error, "{why}: {r:?}");
            assert!(r.description.contains(why), "{why}: {r:?}");
        }
        // No proof, two proofs.
        let none = v.check(
            now,
            &DpopCheck {
                proofs: &[],
                method: "POST",
                url: URL,
                access_token: TOKEN,
                jkt: &jkt,
            },
        );
        assert!(none.unwrap_err().description.contains("no DPoP proof"));
        let p = proof(&key, "POST", URL, TOKEN, None);
        let two = v.check(
            now,
            &DpopCheck {
                proofs: &[&p, &p],
                method: "POST",
                url: URL,
                access_token: TOKEN,
                jkt: &jkt,
            },
        );
        assert!(two.unwrap_err().description.contains("more than one"));
        // A proof too old, or from the future, on the verifier's clock.
        let p = proof(&key, "POST", URL, TOKEN, None);
        let late = check(&v, now + Duration::from_secs(61), &p, &jkt).unwrap_err();
        assert!(late.description.contains("iat"), "{late:?}");
        let early = check(&v, now - Duration::from_secs(61), &p, &jkt).unwrap_err();
        assert!(early.description.contains("iat"), "{early:?}");
        // The refusal is a DPoP 401 naming the algorithms, without a nonce (nonces off).
        match late.decision() {
            AuthDecision::DpopUnauthorized {
                error, algs, nonce, ..
            } => {
                assert_eq!(error.as_deref(), Some("invalid_dpop_proof"));
                assert!(algs.starts_with("ES256"), "{algs}");
                assert_eq!(nonce, None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_proofs_header_must_be_dpop_asymmetric_and_public() {
        let v = DpopVerifier::new(DpopPolicy::default());
        let key = EncodingKey::from_ec_pem(crate::jwt::tests_key::EC_PRIVATE.as_bytes()).unwrap();
        let jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap();
        let jkt = jwk.thumbprint(ThumbprintHash::SHA256).unwrap();
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let claims = serde_json::json!({
            "jti": "j", "htm": "POST", "htu": URL, "iat": secs(SystemTime::now()),
            "ath": crate::jwt::token_hash(TOKEN),
        });
        let now = SystemTime::now();
        let mut good = Header::new(Algorithm::ES256);
        good.typ = Some("dpop+jwt".into());
        good.jwk = Some(jwk.clone());
        assert_eq!(
            check(&v, now, &forged(good.clone(), claims.clone()), &jkt),
            Ok(())
        );
        let mut typ = good.clone();
        typ.typ = Some("JWT".into());
        let mut no_jwk = good.clone();
        no_jwk.jwk = None;
        for (h, why) in [(typ, "typ"), (no_jwk, "no jwk")] {
            let mut c = claims.clone();
            c["jti"] = why.into();
            let r = check(&v, now, &forged(h, c), &jkt).unwrap_err();
            assert!(r.description.contains(why), "{why}: {r:?}");
        }
        // A symmetric algorithm is never accepted.
        let hs = jsonwebtoken::encode(
            &Header {
                typ: Some("dpop+jwt".into()),
                ..Header::new(Algorithm::HS256)
            },
            &claims,
            &EncodingKey::from_secret(b"k").unwrap(),
        )
        .unwrap();
        assert!(
            check(&v, now, &hs, &jkt)
                .unwrap_err()
                .description
                .contains("algorithm")
        );
        // A jwk with its private part.
        let mut header: serde_json::Value = serde_json::to_value(&good).unwrap();
        header["jwk"]["d"] = "secret".into();
        let text = forged(good, claims);
        let rest = text.split_once('.').unwrap().1;
        let leaky = format!("{}.{rest}", b64.encode(header.to_string()));
        assert!(
            check(&v, now, &leaky, &jkt)
                .unwrap_err()
                .description
                .contains("private")
        );
    }

    #[test]
    fn nonces_are_required_rotated_and_the_previous_one_still_passes_one_period() {
        let period = Duration::from_secs(300);
        let v = DpopVerifier::new(DpopPolicy::default().with_nonces(period));
        let key = DpopKey::generate().unwrap();
        let jkt = key.thumbprint();
        let t0 = SystemTime::now();
        let asked = check(&v, t0, &proof(&key, "POST", URL, TOKEN, None), &jkt).unwrap_err();
        assert_eq!(asked.error, "use_dpop_nonce");
        let n1 = asked.nonce.clone().expect("the nonce to use");
        match asked.decision() {
            AuthDecision::DpopUnauthorized { nonce, .. } => {
                assert_eq!(nonce.as_deref(), Some(n1.as_str()))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            check(&v, t0, &proof(&key, "POST", URL, TOKEN, Some(&n1)), &jkt),
            Ok(())
        );
        let wrong = check(
            &v,
            t0,
            &proof(&key, "POST", URL, TOKEN, Some("made-up")),
            &jkt,
        )
        .unwrap_err();
        assert_eq!(
            (wrong.error, wrong.nonce.as_deref()),
            ("use_dpop_nonce", Some(n1.as_str()))
        );
        // One period on (proofs made "now" are checked a period later: the skew allows it
        // only with a wider window; here the window is one period).
        let v = DpopVerifier::new(
            DpopPolicy::default()
                .with_nonces(period)
                .with_max_skew(period * 3),
        );
        let n1 = v.nonce(t0).unwrap();
        let t1 = t0 + period;
        let n2 = v.nonce(t1).unwrap();
        assert_ne!(n1, n2, "rotated");
        assert_eq!(
            check(&v, t1, &proof(&key, "POST", URL, TOKEN, Some(&n1)), &jkt),
            Ok(()),
            "the previous one"
        );
        assert_eq!(
            check(&v, t1, &proof(&key, "POST", URL, TOKEN, Some(&n2)), &jkt),
            Ok(())
        );
        let t2 = t1 + period;
        let stale = check(&v, t2, &proof(&key, "POST", URL, TOKEN, Some(&n1)), &jkt).unwrap_err();
        assert_eq!(stale.error, "use_dpop_nonce");
        assert_ne!(stale.nonce.as_deref(), Some(n1.as_str()));
    }

    #[test]
    fn a_token_requests_proof_has_no_ath_and_names_the_key_to_bind() {
        let v = DpopVerifier::new(DpopPolicy::default());
        let key = DpopKey::generate().unwrap();
        let now = SystemTime::now();
        let as_url = "https://as.example/token";
        let p = key
            .proof(&DpopRequest {
                method: "POST",
                url: as_url,
                access_token: None,
                nonce: None,
            })
            .unwrap();
        assert_eq!(
            v.check_token_request(now, &[&p], as_url),
            Ok(key.thumbprint())
        );
        // A proof with a token's hash is not a token request's.
        let with_ath = proof(&key, "POST", as_url, TOKEN, None);
        let r = v
            .check_token_request(now, &[&with_ath], as_url)
            .unwrap_err();
        assert!(r.description.contains("ath"), "{r:?}");
        // And a resource's check wants the hash.
        let r = check(
            &v,
            now,
            &proof(&key, "POST", URL, TOKEN, None),
            &key.thumbprint(),
        );
        assert_eq!(r, Ok(()));
        let no_ath = key
            .proof(&DpopRequest {
                method: "POST",
                url: URL,
                access_token: None,
                nonce: None,
            })
            .unwrap();
        assert!(
            check(&v, now, &no_ath, &key.thumbprint())
                .unwrap_err()
                .description
                .contains("ath")
        );
    }

    #[test]
    fn the_replay_cache_is_bounded_and_forgets_what_left_the_window() {
        let v = DpopVerifier::new(DpopPolicy::default().with_replay_capacity(2));
        let key = DpopKey::generate().unwrap();
        let jkt = key.thumbprint();
        let now = SystemTime::now();
        let proofs: Vec<String> = (0..3)
            .map(|_| proof(&key, "POST", URL, TOKEN, None))
            .collect();
        for p in &proofs {
            assert_eq!(check(&v, now, p, &jkt), Ok(()));
        }
        assert!(v.lock().order.len() <= 2, "at most the capacity is kept");
        assert!(
            check(&v, now, &proofs[2], &jkt).is_err(),
            "the newest is remembered"
        );
        // Past the window, entries go (and the proof itself is refused as too old anyway).
        let later = now + Duration::from_secs(120);
        let fresh = DpopVerifier::new(DpopPolicy::default());
        assert_eq!(check(&fresh, now, &proofs[0], &jkt), Ok(()));
        let _ = check(&fresh, later, &proofs[1], &jkt);
        assert!(fresh.lock().seen.is_empty(), "expired entries are dropped");
    }
}
