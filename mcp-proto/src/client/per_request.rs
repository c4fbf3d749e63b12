// S-NEW-4, S-NEW-10, G-11, S-NEW-5.
//! Per-request metadata: the modern era's (2026-07-28) wire helpers for the session, where
//! each request carries what a session used to: per-request `_meta`,
//! the `server/discover` probe and its verdict, the
//! `subscriptions/listen` request, and multi round-trip requests (MRTR).
//!
//! Nothing here keeps state: the facade ([`super::ClientSession`]) decides, these functions
//! read and write JSON.

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::config::ClientIdentity;
use super::error::ClientError;
use crate::jsonrpc::meta_keys;
use crate::jsonrpc::{self, Body, Message, Outcome, RequestId, Response};
use crate::version::ProtocolVersion;

/// The probe (and the source of the synthesized `initialize` answer).
pub(crate) const DISCOVER: &str = "server/discover";
/// The modern listening stream.
pub(crate) const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";

// G-11.
/// `-32020` HeaderMismatch, `-32021` MissingRequiredClientCapability, `-32022`
/// UnsupportedProtocolVersion: the errors that identify a modern server. A 2025
/// server answers a modern request with `-32000` or `-32601`, which are not among them.
pub(crate) fn is_modern_error(code: i64) -> bool {
    matches!(code, -32022..=-32020)
}

fn id_value(id: &RequestId) -> Value {
    match id {
        RequestId::Number(n) => Value::from(*n),
        RequestId::String(s) => Value::from(&**s),
    }
}

// S-NEW-7, S-NEW-4.
/// Puts the modern `_meta` into a request's `params`: the protocol version always (it must
/// match the `MCP-Protocol-Version` header), `clientInfo` and `clientCapabilities`
/// unless the app set them. `None` when `bytes` is not a request.
pub(crate) fn with_meta(
    bytes: &[u8],
    version: ProtocolVersion,
    identity: &ClientIdentity,
) -> Option<Bytes> {
    let mut v: Value = serde_json::from_slice(bytes).ok()?;
    let obj = v.as_object_mut()?;
    if obj.get("id").is_none() || obj.get("method").is_none() {
        return None;
    }
    let params = obj
        .entry("params")
        .or_insert_with(|| Value::Object(Map::new()));
    if !params.is_object() {
        *params = Value::Object(Map::new());
    }
    let params = params.as_object_mut()?;
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let meta = meta.as_object_mut()?;
    meta.insert(
        meta_keys::PROTOCOL_VERSION.to_owned(),
        Value::from(version.as_str()),
    );
    meta.entry(meta_keys::CLIENT_CAPABILITIES)
        .or_insert_with(|| identity.capabilities.clone());
    meta.entry(meta_keys::CLIENT_INFO)
        .or_insert_with(|| identity.client_info.clone());
    serde_json::to_vec(&v).ok().map(Bytes::from)
}

/// The method and `params` of a serialized request or notification.
pub(crate) fn method_and_params(bytes: &[u8]) -> Option<(String, Value)> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let method = v.get("method")?.as_str()?.to_owned();
    let params = v.get("params").cloned().unwrap_or(Value::Null);
    Some((method, params))
}

/// A bare request (its `_meta` is added when it is POSTed).
pub(crate) fn request(id: &RequestId, method: &str, params: Value) -> Bytes {
    let v = serde_json::json!({"jsonrpc": "2.0", "id": id_value(id), "method": method, "params": params});
    Bytes::from(v.to_string())
}

/// `clientInfo` and `capabilities` of the app's `initialize`, as the modern identity.
pub(crate) fn identity_from_initialize(bytes: &[u8]) -> Option<ClientIdentity> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let p = v.get("params")?;
    Some(ClientIdentity {
        client_info: p.get("clientInfo")?.clone(),
        capabilities: p
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new())),
    })
}

// S-NEW-10.
/// What the answer to the probe says about the server.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// A result: modern, at the version sent.
    Modern,
    /// `-32022` naming a modern version we speak: probe again with it (one not tried yet, or
    /// else the one refused, a second and last time).
    Retry(ProtocolVersion),
    /// A recognised modern error that the probe cannot get past (`-32020`, `-32021`, or
    /// `-32022` with no version to retry): the server is modern and refused; the error goes to
    /// the app's `initialize`.
    ModernRefused(Response),
    /// `-32022` naming only legacy versions we speak: the server is dual-era with the modern
    /// era off; fall back.
    Legacy,
    /// Not a modern answer: a legacy server (fall back to `initialize`).
    NotModern,
}

/// The verdict on a JSON-RPC response to the probe.
pub(crate) fn verdict(response: &Response, tried: &[ProtocolVersion]) -> Verdict {
    match &response.outcome {
        Outcome::Result(_) => Verdict::Modern,
        Outcome::Error(e) if !is_modern_error(e.code) => Verdict::NotModern,
        Outcome::Error(e) if e.code == -32022 => {
            let supported: Vec<ProtocolVersion> = e
                .data
                .as_deref()
                .and_then(|d| serde_json::from_str::<Value>(d.get()).ok())
                .and_then(|d| {
                    d.get("supported")?.as_array().map(|a| {
                        a.iter()
                            .filter_map(|s| ProtocolVersion::parse(s.as_str()?))
                            .collect()
                    })
                })
                .unwrap_or_default();
            // A modern version both speak: preferably one not tried yet; else the very one
            // refused, once more (the server named the version it refused as supported, which
            // a retry may get past), and never a third time.
            let both = || {
                ProtocolVersion::ALL
                    .into_iter()
                    .filter(|v| !v.has_sessions() && supported.contains(v))
            };
            let times = |v: &ProtocolVersion| tried.iter().filter(|t| *t == v).count();
            let modern = both()
                .find(|v| times(v) == 0)
                .or_else(|| both().find(|v| times(v) == 1));
            match modern {
                Some(v) => Verdict::Retry(v),
                None if supported.iter().any(|v| v.has_sessions()) => Verdict::Legacy,
                None => Verdict::ModernRefused(response.clone()),
            }
        }
        Outcome::Error(_) => Verdict::ModernRefused(response.clone()),
    }
}

// S-NEW-7, S-NEW-9.
/// A single JSON-RPC error response in an HTTP error body (a modern server explains its 4xx
/// this way).
pub(crate) fn error_response(body: &[u8]) -> Option<Response> {
    match jsonrpc::parse_body(body) {
        Ok(Body::Single(Message::Response(r))) if r.is_error() => Some(r),
        _ => None,
    }
}

/// The answer the session gives the app's `initialize` in the modern era, built from the
/// `server/discover` result: `protocolVersion`, `capabilities`, `serverInfo` (from
/// `_meta`), `instructions`.
pub(crate) fn initialize_result(
    id: RequestId,
    version: ProtocolVersion,
    discover: &RawValue,
) -> Response {
    let d: Value = serde_json::from_str(discover.get()).unwrap_or(Value::Null);
    let mut r = Map::new();
    r.insert("protocolVersion".into(), Value::from(version.as_str()));
    r.insert(
        "capabilities".into(),
        d.get("capabilities")
            .filter(|c| c.is_object())
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new())),
    );
    r.insert(
        "serverInfo".into(),
        d.pointer("/_meta")
            .and_then(|m| m.get(meta_keys::SERVER_INFO))
            .filter(|i| i.is_object())
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"name": "", "version": ""})),
    );
    if let Some(i) = d.get("instructions").filter(|i| i.is_string()) {
        r.insert("instructions".into(), i.clone());
    }
    let raw = serde_json::value::to_raw_value(&Value::Object(r))
        .unwrap_or_else(|_| RawValue::from_string("{}".into()).expect("valid JSON"));
    Response::result(id, raw)
}

/// One input request of an `InputRequiredResult`.
#[derive(Debug)]
pub(crate) struct InputRequest {
    pub(crate) key: String,
    pub(crate) method: String,
    pub(crate) params: Option<Box<RawValue>>,
}

/// A parsed `InputRequiredResult`.
#[derive(Debug)]
pub(crate) struct InputRequired {
    pub(crate) requests: Vec<InputRequest>,
    pub(crate) state: Option<String>,
}

/// `Some` when `result` is an `InputRequiredResult` (`"resultType": "input_required"`);
/// `Err` when it is one that cannot be acted on.
pub(crate) fn input_required(result: &RawValue) -> Option<Result<InputRequired, ClientError>> {
    #[derive(serde::Deserialize)]
    struct Peek {
        #[serde(rename = "resultType")]
        result_type: Option<String>,
    }
    let peek: Peek = serde_json::from_str(result.get()).ok()?;
    if peek.result_type.as_deref() != Some("input_required") {
        return None;
    }
    let bad = |detail: &str| {
        Some(Err(ClientError::MalformedInputRequest {
            detail: detail.to_owned(),
        }))
    };
    let Ok(Value::Object(v)) = serde_json::from_str::<Value>(result.get()) else {
        return bad("not an object");
    };
    let state = match v.get("requestState") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return bad("requestState is not a string"),
    };
    let mut requests = Vec::new();
    match v.get("inputRequests") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (key, r) in m {
                let Some(method) = r.get("method").and_then(Value::as_str) else {
                    return bad("an input request has no method");
                };
                let params = match r.get("params") {
                    None | Some(Value::Null) => None,
                    Some(p @ Value::Object(_)) => serde_json::value::to_raw_value(p).ok(),
                    Some(_) => return bad("input request params are not an object"),
                };
                requests.push(InputRequest {
                    key: key.clone(),
                    method: method.to_owned(),
                    params,
                });
            }
        }
        Some(_) => return bad("inputRequests is not an object"),
    }
    if requests.is_empty() && state.is_none() {
        return bad("neither inputRequests nor requestState");
    }
    Some(Ok(InputRequired { requests, state }))
}

/// The retry of `original` (the app's request) under `wire_id`, with this round's
/// `inputResponses` and the server's `requestState` echoed exactly (and none when the server
/// gave none).
pub(crate) fn retry(
    original: &[u8],
    wire_id: &RequestId,
    responses: &[(String, Box<RawValue>)],
    state: Option<&str>,
) -> Option<Bytes> {
    let mut v: Value = serde_json::from_slice(original).ok()?;
    let obj = v.as_object_mut()?;
    obj.insert("id".into(), id_value(wire_id));
    let params = obj
        .entry("params")
        .or_insert_with(|| Value::Object(Map::new()));
    if !params.is_object() {
        *params = Value::Object(Map::new());
    }
    let params = params.as_object_mut()?;
    params.remove("inputResponses");
    params.remove("requestState");
    if !responses.is_empty() {
        let mut m = Map::new();
        for (k, r) in responses {
            m.insert(k.clone(), serde_json::from_str(r.get()).ok()?);
        }
        params.insert("inputResponses".into(), Value::Object(m));
    }
    if let Some(s) = state {
        params.insert("requestState".into(), Value::from(s));
    }
    serde_json::to_vec(&v).ok().map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(s: &str) -> Response {
        match jsonrpc::parse_message(s.as_bytes()).unwrap() {
            Message::Response(r) => r,
            _ => panic!(),
        }
    }

    #[test]
    fn s_new_4_meta_is_added_and_the_version_always_wins() {
        let id = ClientIdentity::default();
        let b = with_meta(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"x","io.modelcontextprotocol/clientInfo":{"name":"app","version":"2"}}}}"#,
            ProtocolVersion::V2026_07_28,
            &id,
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&b).unwrap();
        let m = &v["params"]["_meta"];
        assert_eq!(m[meta_keys::PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(m[meta_keys::CLIENT_INFO]["name"], "app");
        assert_eq!(m[meta_keys::CLIENT_CAPABILITIES], serde_json::json!({}));
        let b = with_meta(
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            ProtocolVersion::V2026_07_28,
            &id,
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            v["params"]["_meta"][meta_keys::CLIENT_INFO]["name"],
            "mcp-proto"
        );
        assert!(
            with_meta(
                br#"{"jsonrpc":"2.0","method":"n"}"#,
                ProtocolVersion::V2026_07_28,
                &id
            )
            .is_none()
        );
    }

    #[test]
    fn g_11_only_the_modern_codes_identify_a_modern_server() {
        let none: &[ProtocolVersion] = &[];
        assert!(matches!(
            verdict(
                &resp(
                    r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Unsupported protocol version"}}"#
                ),
                none
            ),
            Verdict::NotModern
        ));
        assert!(matches!(
            verdict(
                &resp(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}"#),
                none
            ),
            Verdict::NotModern
        ));
        assert!(matches!(
            verdict(
                &resp(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"m"}}"#),
                none
            ),
            Verdict::ModernRefused(_)
        ));
        assert!(matches!(
            verdict(
                &resp(
                    r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"m","data":{"supported":["2026-07-28"]}}}"#
                ),
                none
            ),
            Verdict::Retry(ProtocolVersion::V2026_07_28)
        ));
        // The very version refused, listed as supported: once more, not a third time.
        assert!(matches!(
            verdict(
                &resp(
                    r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"m","data":{"supported":["2026-07-28"]}}}"#
                ),
                &[ProtocolVersion::V2026_07_28]
            ),
            Verdict::Retry(ProtocolVersion::V2026_07_28)
        ));
        assert!(matches!(
            verdict(
                &resp(
                    r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"m","data":{"supported":["2026-07-28"]}}}"#
                ),
                &[ProtocolVersion::V2026_07_28, ProtocolVersion::V2026_07_28]
            ),
            Verdict::ModernRefused(_)
        ));
        assert!(matches!(
            verdict(
                &resp(
                    r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"m","data":{"supported":["2025-11-25","1999-01-01"]}}}"#
                ),
                none
            ),
            Verdict::Legacy
        ));
        assert!(matches!(
            verdict(&resp(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), none),
            Verdict::Modern
        ));
    }

    #[test]
    fn s_new_5_input_required_results_and_retries() {
        let raw = RawValue::from_string(r#"{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"},"b":{"method":"sampling/createMessage","params":{"maxTokens":1}}},"requestState":"st"}"#.into()).unwrap();
        let ir = input_required(&raw).unwrap().unwrap();
        assert_eq!(ir.requests.len(), 2);
        assert_eq!(ir.state.as_deref(), Some("st"));
        let complete =
            RawValue::from_string(r#"{"resultType":"complete","content":[]}"#.into()).unwrap();
        assert!(input_required(&complete).is_none());
        let empty = RawValue::from_string(r#"{"resultType":"input_required"}"#.into()).unwrap();
        assert!(matches!(input_required(&empty), Some(Err(_))));
        let answers = vec![(
            "a".to_owned(),
            RawValue::from_string(r#"{"roots":[]}"#.into()).unwrap(),
        )];
        let b = retry(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t"}}"#,
            &RequestId::String("7#1".into()),
            &answers,
            Some("st"),
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["id"], "7#1");
        assert_eq!(v["params"]["name"], "t");
        assert_eq!(
            v["params"]["inputResponses"]["a"]["roots"],
            serde_json::json!([])
        );
        assert_eq!(v["params"]["requestState"], "st");
        let b = retry(
            br#"{"jsonrpc":"2.0","id":7,"method":"x"}"#,
            &RequestId::Number(8),
            &[],
            None,
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert!(v["params"].get("requestState").is_none());
    }
}
