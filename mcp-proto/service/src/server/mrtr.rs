//! Multi round-trip requests (MRTR, 2026-07-28, SEP-2322): how one handler's awaited
//! server→client request (sampling, elicitation, roots through [`RequestContext`](super::RequestContext)) becomes an
//! `InputRequiredResult` for a modern client, while a legacy client gets a real JSON-RPC
//! request from the very same code.
//!
//! # Theory of operation: re-run with the answers available
//!
//! A modern `tools/call`, `prompts/get` or `resources/read` gets an MRTR round. Each
//! `send_request` of its handler, in call order, takes a key `"{n}:{method}"` (its index in
//! this run and the method), or the key the handler names (`send_request_keyed`); an answer
//! is bound to the method it answered, so a handler that asks something else on a re-run is
//! asked again rather than handed a foreign answer:
//!
//! - when the round's answers hold that key, the awaited call resolves with it at once;
//! - otherwise the request is recorded under that key and the round is *signalled*: the
//!   handler stays parked at that `await`, and once it yields (every request it issued in
//!   the same poll — a `join` of two asks — is recorded too) it is dropped and the client gets
//!   `{"resultType": "input_required", "inputRequests": {key: {method, params}},
//!   "requestState": …}`.
//!
//! The client retries the original request (new id) with `inputResponses` and the
//! `requestState`; the handler runs again from the start, this time finding its answers.
//! Handlers must therefore be *replayable*: what they do before their last ask runs once per
//! round (side effects belong after the asks, or must be idempotent).
//!
//! `requestState` carries the answers of earlier rounds (so the client sends only the new
//! ones), the round count, the method, a SHA-256 digest of the request's own params (minus
//! `_meta`, `inputResponses`, `requestState`), the principal the request came from and an
//! expiry. It is sealed with an HMAC under the server's [`StateKeys`]
//! ([`Server::request_state_keys`](super::Server::request_state_keys); see [`super::seal`]):
//! a state that fails verification, has expired, or is presented on another method, other
//! params or by another principal is refused with -32602 and the handler never runs. Answers
//! a handler got in an earlier round therefore reach it exactly as the client gave them then,
//! which is what lets a handler trust them (the spec requires integrity protection as soon
//! as the state influences what the server does). The payload is not encrypted: it holds
//! only what the client itself sent, so no server secret belongs in it.
//!
//! Bounded: after [`Server::max_input_rounds`](super::Server::max_input_rounds) rounds
//! (default 8) a further ask fails with an error instead of another round.
//!
//! ```text
//!  state        event                                  next         effect
//!  -----------  -------------------------------------  -----------  ---------------------------
//!  Running      ask, answer present                    Running      the await resolves
//!  Running      ask, no answer, rounds < max           Signalled    request recorded
//!  Running      ask, no answer, rounds = max           Running      the await fails
//!  Signalled    further asks in the same poll          Signalled    recorded too
//!  Signalled    handler yields                         Done         InputRequiredResult sent
//!  Running      handler returns                        Done         its result sent
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

pub use super::seal::StateKeys;

use crate::Error;
use crate::cancel::{CancellationToken, WaitForCancellation, lock};
use crate::schema::methods;
use mcp_proto::jsonrpc::{RawValue, Request, RequestId, Response};

/// The methods on which a server may answer `InputRequiredResult` (the only ones).
pub const MRTR_METHODS: [&str; 3] = [
    methods::TOOLS_CALL,
    methods::PROMPTS_GET,
    methods::RESOURCES_READ,
];

/// Default bound on input rounds per request.
pub const DEFAULT_MAX_INPUT_ROUNDS: u32 = 8;

#[derive(Serialize, Deserialize)]
struct State {
    /// Method.
    m: String,
    /// Digest of the salient params.
    d: String,
    /// Rounds done.
    n: u32,
    /// Answers so far, by key: the method asked (when it is known) and the client's answer.
    a: BTreeMap<String, (Option<String>, Value)>,
    /// The asks of the round this state ends, by key: their methods, which the retry's
    /// answers under those keys are bound to.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    q: BTreeMap<String, String>,
    /// The principal the request came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    p: Option<String>,
    /// Expiry, Unix seconds.
    e: u64,
}

/// One modern request's MRTR bookkeeping (see the module docs).
pub(crate) struct Mrtr {
    method: String,
    digest: String,
    principal: Option<String>,
    keys: Arc<StateKeys>,
    rounds: u32,
    max_rounds: u32,
    answers: BTreeMap<String, (Option<String>, Value)>,
    next: AtomicUsize,
    /// The keys asked in this run.
    used: std::sync::Mutex<std::collections::BTreeSet<String>>,
    needed: std::sync::Mutex<BTreeMap<String, Value>>,
    signal: CancellationToken,
}

impl std::fmt::Debug for Mrtr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mrtr")
            .field("method", &self.method)
            .field("rounds", &self.rounds)
            .field("answers", &self.answers.len())
            .finish_non_exhaustive()
    }
}

/// Sorts object keys recursively, so the digest does not depend on the client's key order.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, Value> =
                m.iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// SHA-256 over the method and the canonical salient params: stable across processes and
/// builds, so any instance sharing the key recognizes the request.
fn digest(method: &str, params: &serde_json::Map<String, Value>) -> String {
    let mut salient = params.clone();
    for k in ["_meta", "inputResponses", "requestState"] {
        salient.remove(k);
    }
    let mut h = Sha256::new();
    h.update(method.as_bytes());
    h.update([0]);
    h.update(canonical(&Value::Object(salient)).to_string().as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

impl Mrtr {
    /// The round of `request` when it is a modern request of an MRTR method; `Err` when its
    /// `requestState` or `inputResponses` cannot be accepted.
    pub(crate) fn for_request(
        request: &Request,
        max_rounds: u32,
        keys: &Arc<StateKeys>,
        principal: Option<&str>,
    ) -> Option<Result<Self, Error>> {
        if !MRTR_METHODS.contains(&&*request.method) {
            return None;
        }
        let params: serde_json::Map<String, Value> = request
            .params
            .as_deref()
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default();
        Some(Self::new(
            &request.method,
            &params,
            max_rounds,
            keys,
            principal,
        ))
    }

    fn new(
        method: &str,
        params: &serde_json::Map<String, Value>,
        max_rounds: u32,
        keys: &Arc<StateKeys>,
        principal: Option<&str>,
    ) -> Result<Self, Error> {
        let digest = digest(method, params);
        let mut answers = BTreeMap::new();
        let mut asked = BTreeMap::new();
        let mut rounds = 0;
        match params.get("requestState") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                let state: State = keys
                    .open(s)
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .ok_or_else(|| {
                        Error::invalid_params("invalid requestState: it fails verification")
                    })?;
                if state.m != method || state.d != digest {
                    return Err(Error::invalid_params(
                        "requestState belongs to another request",
                    ));
                }
                if state.p.as_deref() != principal {
                    return Err(Error::invalid_params(
                        "requestState belongs to another principal",
                    ));
                }
                if state.e <= keys.now_secs() {
                    return Err(Error::invalid_params(
                        "requestState has expired: send the request again without it",
                    ));
                }
                rounds = state.n;
                answers = state.a;
                asked = state.q;
            }
            Some(_) => return Err(Error::invalid_params("requestState must be a string")),
        }
        match params.get("inputResponses") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                // An answer to what the last round asked is bound to the method asked; one
                // the client volunteers (no round asked it yet) binds to the first ask under
                // its key, and one no ask ever names is ignored (the spec: ignore what is not
                // recognized). An answer of the wrong shape fails that ask, not the request.
                for (k, v) in m {
                    answers.insert(k.clone(), (asked.get(k).cloned(), v.clone()));
                }
            }
            Some(_) => return Err(Error::invalid_params("inputResponses must be an object")),
        }
        Ok(Mrtr {
            method: method.to_owned(),
            digest,
            principal: principal.map(str::to_owned),
            keys: keys.clone(),
            rounds,
            max_rounds,
            answers,
            next: AtomicUsize::new(0),
            used: std::sync::Mutex::new(std::collections::BTreeSet::new()),
            needed: std::sync::Mutex::new(BTreeMap::new()),
            signal: CancellationToken::new(),
        })
    }

    /// A handler asks `method` with `params`, under `key` (or, without one, `"{n}:{method}"`
    /// for its `n`-th ask): `Ok(Some(answer))` when this round has an answer under that key
    /// *to that method*, `Ok(None)` when it was recorded for the client (the caller then
    /// parks), `Err` when the round limit is reached or the key was already used in this run
    /// (keys must be unique within a request).
    pub(crate) fn ask(
        &self,
        key: Option<&str>,
        method: &str,
        params: &RawValue,
    ) -> Result<Option<Value>, Error> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let key = key.map_or_else(|| format!("{n}:{method}"), str::to_owned);
        if !lock(&self.used).insert(key.clone()) {
            return Err(Error::new(format_args!(
                "{method}: the input key {key:?} was already used by this request"
            )));
        }
        if let Some((asked, answer)) = self.answers.get(&key)
            && asked.as_deref().is_none_or(|asked| asked == method)
        {
            return Ok(Some(answer.clone()));
        }
        if self.rounds >= self.max_rounds {
            return Err(Error::new(format_args!(
                "{method}: the client was already asked for input {} times on this request",
                self.rounds
            )));
        }
        let params: Value = serde_json::from_str(params.get()).unwrap_or(Value::Null);
        lock(&self.needed).insert(key, serde_json::json!({"method": method, "params": params}));
        self.signal.cancel();
        Ok(None)
    }

    /// The `InputRequiredResult` of this round.
    fn input_required(&self) -> Value {
        let state = State {
            m: self.method.clone(),
            d: self.digest.clone(),
            n: self.rounds + 1,
            a: self.answers.clone(),
            q: lock(&self.needed)
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v["method"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect(),
            p: self.principal.clone(),
            e: self.keys.expiry(),
        };
        let state = self
            .keys
            .seal(&serde_json::to_vec(&state).unwrap_or_default());
        let mut result = serde_json::json!({
            "resultType": "input_required",
            "inputRequests": *lock(&self.needed),
            "requestState": state,
        });
        // An empty `content` on a `tools/call` round (the schema allows members beyond its
        // own): clients that read every tool result as a `CallToolResult`, as mcp-go's
        // does, require it.
        if self.method == methods::TOOLS_CALL {
            result["content"] = Value::Array(Vec::new());
        }
        result
    }
}

/// Runs a handler's future until it answers or its MRTR round is signalled (then answers
/// with the round's `InputRequiredResult`). The handler is polled first, so every ask it
/// makes in one poll lands in the same round.
pub(crate) struct RaceInput<F> {
    pub(crate) work: Pin<Box<F>>,
    pub(crate) signal: WaitForCancellation,
    pub(crate) mrtr: Arc<Mrtr>,
    pub(crate) id: RequestId,
}

impl<F> RaceInput<F> {
    pub(crate) fn new(work: F, mrtr: Arc<Mrtr>, id: RequestId) -> Self {
        RaceInput {
            work: Box::pin(work),
            signal: mrtr.signal.cancelled(),
            mrtr,
            id,
        }
    }
}

impl<F: Future<Output = Response>> Future for RaceInput<F> {
    type Output = Response;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        if let Poll::Ready(r) = self.work.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        if Pin::new(&mut self.signal).poll(cx).is_ready() {
            let result = self.mrtr.input_required();
            let id = self.id.clone();
            return Poll::Ready(match serde_json::value::to_raw_value(&result) {
                Ok(raw) => Response::result(id, raw),
                Err(e) => Response::error(Some(id), Error::internal(e).to_error_object()),
            });
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::{Duration, SystemTime};

    fn req(params: Value) -> Request {
        Request {
            id: RequestId::Number(1),
            method: "tools/call".into(),
            params: Some(serde_json::value::to_raw_value(&params).unwrap()),
        }
    }

    fn keys() -> Arc<StateKeys> {
        Arc::new(StateKeys::new([3u8; 32]).unwrap())
    }

    /// One round: asks an elicitation, returns the sealed state it hands out.
    fn first_round(keys: &Arc<StateKeys>, principal: Option<&str>, params: &Value) -> String {
        let m = Mrtr::for_request(&req(params.clone()), 8, keys, principal)
            .unwrap()
            .unwrap();
        let raw = serde_json::value::to_raw_value(&json!({"message": "?"})).unwrap();
        assert_eq!(m.ask(None, "elicitation/create", &raw).unwrap(), None);
        let r = m.input_required();
        assert_eq!(r["resultType"], "input_required");
        assert_eq!(
            r["inputRequests"]["0:elicitation/create"]["method"],
            "elicitation/create"
        );
        r["requestState"].as_str().unwrap().to_owned()
    }

    fn retry(params: &Value, state: &str, answer: Value) -> Value {
        let mut p = params.as_object().unwrap().clone();
        p.insert("requestState".into(), state.into());
        p.insert(
            "inputResponses".into(),
            json!({ "0:elicitation/create": answer }),
        );
        Value::Object(p)
    }

    fn refusal(keys: &Arc<StateKeys>, principal: Option<&str>, params: Value) -> String {
        match Mrtr::for_request(&req(params), 8, keys, principal).unwrap() {
            Err(e) => e.to_error_object().message.to_string(),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn state_round_trips_and_binds_to_the_request() {
        let k = keys();
        let p = json!({"name": "t", "arguments": {"b": 1, "a": 2}});
        let state = first_round(&k, None, &p);
        // Retry, keys reordered: same request.
        let reordered = json!({"arguments": {"a": 2, "b": 1}, "name": "t"});
        let m2 = Mrtr::for_request(
            &req(retry(&reordered, &state, json!({"action": "decline"}))),
            8,
            &k,
            None,
        )
        .unwrap()
        .unwrap();
        let raw = serde_json::value::to_raw_value(&json!({"message": "?"})).unwrap();
        assert_eq!(
            m2.ask(None, "elicitation/create", &raw).unwrap(),
            Some(json!({"action": "decline"}))
        );
        // Other params: refused.
        let other = json!({"name": "u", "requestState": state});
        assert!(refusal(&k, None, other).contains("another request"));
        assert!(refusal(&k, None, json!({"requestState": "!!"})).contains("verification"));
    }

    #[test]
    fn a_tampered_or_foreign_state_is_refused() {
        let k = keys();
        let p = json!({"name": "t"});
        let state = first_round(&k, None, &p);
        // A forged state: the real payload with its answers changed, re-encoded, tag kept.
        let (body, tag) = state.strip_prefix("v1.").unwrap().split_once('.').unwrap();
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let mut payload: Value = serde_json::from_slice(&b64.decode(body).unwrap()).unwrap();
        payload["a"] =
            json!({"0:elicitation/create": {"action": "accept", "content": {"admin": true}}});
        let forged = format!("v1.{}.{tag}", b64.encode(payload.to_string()));
        assert!(refusal(&k, None, retry(&p, &forged, json!(null))).contains("verification"));
        // An unsealed state of the old format (plain base64 JSON) is refused too.
        assert!(refusal(&k, None, retry(&p, body, json!(null))).contains("verification"));
        // Sealed by another server (another key).
        let foreign = keys_of(9);
        assert!(refusal(&foreign, None, retry(&p, &state, json!(null))).contains("verification"));
        // Another key accepted during a rotation opens it.
        let rotated = Arc::new(
            StateKeys::new([9u8; 32])
                .unwrap()
                .accept([3u8; 32])
                .unwrap(),
        );
        assert!(
            Mrtr::for_request(&req(retry(&p, &state, json!(null))), 8, &rotated, None)
                .unwrap()
                .is_ok()
        );
    }

    fn keys_of(b: u8) -> Arc<StateKeys> {
        Arc::new(StateKeys::new([b; 32]).unwrap())
    }

    #[test]
    fn the_state_is_bound_to_the_principal() {
        let k = keys();
        let p = json!({"name": "t"});
        let alice = first_round(&k, Some("alice"), &p);
        assert!(refusal(&k, Some("bob"), retry(&p, &alice, json!(null))).contains("principal"));
        assert!(refusal(&k, None, retry(&p, &alice, json!(null))).contains("principal"));
        assert!(
            Mrtr::for_request(&req(retry(&p, &alice, json!(null))), 8, &k, Some("alice"))
                .unwrap()
                .is_ok()
        );
        let anonymous = first_round(&k, None, &p);
        assert!(
            refusal(&k, Some("alice"), retry(&p, &anonymous, json!(null))).contains("principal")
        );
    }

    #[test]
    fn the_state_expires() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let now = Arc::new(std::sync::Mutex::new(t0));
        let clock = now.clone();
        let k = Arc::new(
            StateKeys::new([3u8; 32])
                .unwrap()
                .ttl(Duration::from_secs(60))
                .clock(move || *clock.lock().unwrap()),
        );
        let p = json!({"name": "t"});
        let state = first_round(&k, None, &p);
        *now.lock().unwrap() = t0 + Duration::from_secs(59);
        assert!(
            Mrtr::for_request(&req(retry(&p, &state, json!(null))), 8, &k, None)
                .unwrap()
                .is_ok()
        );
        *now.lock().unwrap() = t0 + Duration::from_secs(60);
        assert!(refusal(&k, None, retry(&p, &state, json!(null))).contains("expired"));
    }

    #[test]
    fn keyed_asks_and_answers_bound_to_what_was_asked() {
        let k = keys();
        let p = json!({"name": "t"});
        let raw = serde_json::value::to_raw_value(&json!({})).unwrap();
        let m = Mrtr::for_request(&req(p.clone()), 8, &k, None)
            .unwrap()
            .unwrap();
        assert_eq!(
            m.ask(Some("user_name"), "elicitation/create", &raw)
                .unwrap(),
            None
        );
        // A key is unique within the request.
        assert!(m.ask(Some("user_name"), "roots/list", &raw).is_err());
        let r = m.input_required();
        assert_eq!(
            r["inputRequests"]["user_name"]["method"],
            "elicitation/create"
        );
        let state = r["requestState"].as_str().unwrap().to_owned();
        // The retry answers the key asked, and volunteers one no ask names (ignored).
        let mut retry = p.as_object().unwrap().clone();
        retry.insert("requestState".into(), state.into());
        retry.insert(
            "inputResponses".into(),
            json!({"user_name": {"action": "accept"}, "0:roots/list": {"roots": []}}),
        );
        let retry = Value::Object(retry);
        let m = Mrtr::for_request(&req(retry.clone()), 8, &k, None)
            .unwrap()
            .unwrap();
        assert_eq!(
            m.ask(Some("user_name"), "elicitation/create", &raw)
                .unwrap(),
            Some(json!({"action": "accept"}))
        );
        assert_eq!(
            m.ask(None, "roots/list", &raw).unwrap(),
            None,
            "its key is 1:roots/list"
        );
        // A re-run asking another method under the same key is asked again.
        let m = Mrtr::for_request(&req(retry), 8, &k, None)
            .unwrap()
            .unwrap();
        assert_eq!(
            m.ask(Some("user_name"), "sampling/createMessage", &raw)
                .unwrap(),
            None
        );
    }

    #[test]
    fn rounds_are_bounded() {
        let k = keys();
        let p = json!({"name": "t"});
        let mut params = p.as_object().unwrap().clone();
        let raw = serde_json::value::to_raw_value(&json!({})).unwrap();
        for round in 0..3 {
            let m = Mrtr::new("tools/call", &params, 2, &k, None).unwrap();
            // Asks a fresh question every round (answers never match: another index).
            for _ in 0..round {
                let _ = m.next.fetch_add(1, Ordering::Relaxed);
            }
            let asked = m.ask(None, "roots/list", &raw);
            if round < 2 {
                assert_eq!(asked.unwrap(), None);
                let r = m.input_required();
                params.insert("requestState".into(), r["requestState"].clone());
            } else {
                assert!(asked.is_err(), "the third round is refused");
            }
        }
    }

    #[test]
    fn only_the_three_methods_take_part() {
        let mut r = req(json!({}));
        r.method = "tools/list".into();
        assert!(Mrtr::for_request(&r, 8, &keys(), None).is_none());
    }
}
