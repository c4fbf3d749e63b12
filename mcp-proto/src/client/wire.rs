//! The seam between the session and the JSON-RPC / SSE layers: classifying what the app sends,
//! parsing what the server sends, building the few messages the session writes itself, and
//! reading an SSE body into JSON payloads while tracking the stream's last event id and `retry`.

use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;

use super::error::{ApiMisuse, ClientError, Limit, ServerFault};
use crate::jsonrpc::{self, Body, Outcome};
pub use crate::jsonrpc::{Message, RequestId, Response};
use crate::sse::{SseDecoder, SseLimits};
use crate::version::ProtocolVersion;

/// The JSON-RPC method the session watches for.
pub(crate) const INITIALIZE: &str = "initialize";
// S-LIFE-4.
/// The notification the session sends itself after `initialize`.
pub(crate) const INITIALIZED: &str = "notifications/initialized";

/// What the app asked to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outgoing {
    Request { id: RequestId, method: Box<str> },
    Notification { method: Box<str> },
    Response(Response),
}

impl From<Message> for Outgoing {
    fn from(message: Message) -> Self {
        match message {
            Message::Request(r) => Outgoing::Request {
                id: r.id,
                method: r.method,
            },
            Message::Notification(n) => Outgoing::Notification { method: n.method },
            Message::Response(r) => Outgoing::Response(r),
        }
    }
}

// S-POST-6, S-RPC-11.
/// Classifies one serialized message from the app. Batches are not sent (the
/// 2025-03-26 batch is optional to send).
pub(crate) fn classify(bytes: &[u8]) -> Result<Outgoing, ApiMisuse> {
    match jsonrpc::parse_body(bytes) {
        Ok(Body::Single(m)) => Ok(Outgoing::from(m)),
        Ok(Body::Batch(_)) => Err(ApiMisuse::NotJsonRpc {
            detail: "send one message at a time, not a batch".into(),
        }),
        Err(e) => Err(ApiMisuse::NotJsonRpc {
            detail: e.to_string(),
        }),
    }
}

// S-RPC-10.
/// Checks a message the app built rather than parsed for what [`classify`] would refuse in
/// its bytes: `params` that is not an object, a success response without an id.
/// The other invariants are the types' own.
pub(crate) fn check_outgoing(message: &Message) -> Result<(), ApiMisuse> {
    let refuse = |detail: &str| {
        Err(ApiMisuse::NotJsonRpc {
            detail: detail.into(),
        })
    };
    match message {
        Message::Response(r) if r.id.is_none() && !r.is_error() => {
            refuse("a success response must have an id")
        }
        Message::Response(_) => Ok(()),
        _ => match message.params().map(|p| p.get()) {
            // `null` is read as absent (S-RPC-10).
            Some(p) if p != "null" && !p.trim_start().starts_with('{') => {
                refuse("params must be an object")
            }
            _ => Ok(()),
        },
    }
}

/// One element of a parsed body: a message, or why it is not one.
pub(crate) type Parsed = Result<Message, ClientError>;

// G-8.
/// Parses a body or an SSE `data` payload. A batch is accepted when `version` allows it, or
/// before any version is negotiated.
pub(crate) fn parse_incoming(
    bytes: &[u8],
    version: Option<ProtocolVersion>,
) -> Result<Vec<Parsed>, ServerFault> {
    match jsonrpc::parse_body(bytes) {
        Ok(Body::Single(m)) => Ok(vec![Ok(m)]),
        Ok(Body::Batch(items)) => match version {
            Some(v) if !v.allows_batch() => Err(ServerFault::BatchNotAllowed { version: v }),
            _ => Ok(items
                .into_iter()
                .map(|i| {
                    i.map_err(|e| {
                        ClientError::Protocol(ServerFault::InvalidJsonRpc {
                            detail: e.to_string(),
                        })
                    })
                })
                .collect()),
        },
        Err(e) => Err(ServerFault::InvalidJsonRpc {
            detail: e.to_string(),
        }),
    }
}

#[derive(Deserialize)]
struct InitializeResultPeek {
    #[serde(rename = "protocolVersion")]
    protocol_version: Option<String>,
}

/// The negotiated version of an `initialize` response: `Ok(None)` for a JSON-RPC error
/// response, `Err` for a result whose `protocolVersion` is missing or one we do not speak in the
/// legacy era (initialize negotiates only legacy revisions).
pub(crate) fn initialize_version(
    response: &Response,
) -> Result<Option<ProtocolVersion>, ServerFault> {
    match &response.outcome {
        Outcome::Error(_) => Ok(None),
        Outcome::Result(raw) => {
            let offered = serde_json::from_str::<InitializeResultPeek>(raw.get())
                .ok()
                .and_then(|p| p.protocol_version);
            match offered.as_deref().and_then(ProtocolVersion::parse) {
                Some(v) if v.has_sessions() => Ok(Some(v)),
                _ => Err(ServerFault::UnsupportedVersion { offered }),
            }
        }
    }
}

// S-LIFE-4.
/// `notifications/initialized`.
pub(crate) fn initialized_notification() -> Bytes {
    Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
}

// S-POST-17, S-CANCEL-1.
/// `notifications/cancelled` for `id`.
pub(crate) fn cancelled_notification(id: &RequestId, reason: Option<&str>) -> Bytes {
    let id = match id {
        RequestId::Number(n) => serde_json::Value::from(*n),
        RequestId::String(s) => serde_json::Value::from(&**s),
    };
    let mut params = serde_json::Map::new();
    params.insert("requestId".into(), id);
    if let Some(r) = reason {
        params.insert("reason".into(), r.into());
    }
    let v = serde_json::json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": params,
    });
    Bytes::from(v.to_string())
}

/// The saved `initialize` request with its id replaced (re-initialization uses a fresh,
/// session-owned id so that its response can never be taken for an app request's).
pub(crate) fn with_id(saved: &[u8], id: RequestId) -> Option<Bytes> {
    match jsonrpc::parse_body(saved) {
        Ok(Body::Single(Message::Request(mut r))) => {
            r.id = id;
            Some(Message::Request(r).to_bytes())
        }
        _ => None,
    }
}

// S-SESS-3.
/// Whether `id` is visible ASCII within `max` bytes.
pub(crate) fn valid_session_id(id: &[u8], max: usize) -> bool {
    !id.is_empty() && id.len() <= max && id.iter().all(|b| (0x21..=0x7E).contains(b))
}

/// Reads one SSE body: JSON payloads out, last event id and `retry` tracked.
#[derive(Debug)]
pub(crate) struct SseReader {
    decoder: SseDecoder,
    /// Whether this connection brought an event id we had not seen (progress).
    pub(crate) progressed: bool,
}

/// What one chunk of SSE yielded.
#[derive(Debug, Default)]
pub(crate) struct SseYield {
    /// `data` of each message event, in order (priming and non-message events skipped).
    pub(crate) payloads: Vec<Bytes>,
    /// The stream went over a limit; it must be dropped.
    pub(crate) error: Option<ServerFault>,
    /// The server said events after our `Last-Event-ID` were evicted before we resumed
    /// (an [`EVENTS_LOST`](crate::sse::EVENTS_LOST) event).
    pub(crate) events_lost: bool,
}

impl SseReader {
    pub(crate) fn new(max_event_bytes: usize) -> Self {
        SseReader {
            decoder: SseDecoder::with_limits(SseLimits {
                max_line_bytes: max_event_bytes.saturating_add(16),
                max_event_bytes,
            }),
            progressed: false,
        }
    }

    /// Feeds a chunk. `last_event_id` and `retry` are the logical stream's (they survive
    /// reconnects) and are updated in place.
    pub(crate) fn feed(
        &mut self,
        chunk: Bytes,
        last_event_id: &mut Option<Box<str>>,
        retry: &mut Option<Duration>,
    ) -> SseYield {
        self.decoder.feed_bytes(chunk);
        let mut out = SseYield::default();
        loop {
            match self.decoder.next_event() {
                Ok(Some(ev)) => {
                    if let Some(id) = ev.id.as_deref() {
                        self.record(id, last_event_id);
                    }
                    // S-SSE-18: only `message` events carry JSON-RPC; priming events carry
                    // nothing (their id is recorded above).
                    if ev.is_message() && !ev.is_priming() {
                        out.payloads.push(ev.data);
                    } else if ev.event.as_deref() == Some(crate::sse::EVENTS_LOST) {
                        out.events_lost = true;
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    out.error = Some(ServerFault::LimitExceeded {
                        limit: Limit::SseEvent,
                    });
                    break;
                }
            }
        }
        // An `id:` in a block without data is not dispatched but still moves the cursor.
        self.note_id(last_event_id);
        if let Some(r) = self.decoder.retry() {
            *retry = Some(r);
        }
        out
    }

    fn note_id(&mut self, last_event_id: &mut Option<Box<str>>) {
        let id = self.decoder.last_event_id();
        if !id.is_empty() && last_event_id.as_deref() != Some(id) {
            *last_event_id = Some(id.into());
            self.progressed = true;
        }
    }

    fn record(&mut self, id: &str, last_event_id: &mut Option<Box<str>>) {
        if !id.is_empty() && last_event_id.as_deref() != Some(id) {
            *last_event_id = Some(id.into());
            self.progressed = true;
        }
    }

    // S-SSE-13.
    /// Marks the end of the body (an unterminated event is discarded).
    pub(crate) fn finish(&mut self) {
        self.decoder.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s_post_6_the_app_sends_one_message_at_a_time() {
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#),
            Ok(Outgoing::Request {
                id: RequestId::Number(7),
                method: "tools/list".into()
            })
        );
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Outgoing::Notification {
                method: INITIALIZED.into()
            })
        );
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","id":"s","result":{}}"#),
            Ok(Outgoing::Response(_))
        ));
        assert!(classify(br#"[{"jsonrpc":"2.0","method":"x"}]"#).is_err());
        assert!(classify(b"{").is_err());
    }

    #[test]
    fn g_8_batches_only_where_the_version_allows_them() {
        let batch = br#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"n"}]"#;
        assert_eq!(
            parse_incoming(batch, Some(ProtocolVersion::V2025_03_26))
                .unwrap()
                .len(),
            2
        );
        assert_eq!(parse_incoming(batch, None).unwrap().len(), 2);
        assert_eq!(
            parse_incoming(batch, Some(ProtocolVersion::V2025_06_18)),
            Err(ServerFault::BatchNotAllowed {
                version: ProtocolVersion::V2025_06_18
            })
        );
    }

    #[test]
    fn s_life_9_initialize_versions() {
        let ok = |v: &str| {
            let m = crate::jsonrpc::parse_message(
                format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"protocolVersion":"{v}"}}}}"#)
                    .as_bytes(),
            )
            .unwrap();
            let Message::Response(r) = m else { panic!() };
            initialize_version(&r)
        };
        assert_eq!(ok("2025-06-18"), Ok(Some(ProtocolVersion::V2025_06_18)));
        assert!(ok("2026-07-28").is_err(), "not negotiated by initialize");
        assert!(ok("2024-11-05").is_err());
    }

    #[test]
    fn s_post_17_cancelled_notification_and_reinit_id() {
        let b = cancelled_notification(&RequestId::String("a\"b".into()), Some("why"));
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["method"], "notifications/cancelled");
        assert_eq!(v["params"]["requestId"], "a\"b");
        assert_eq!(v["params"]["reason"], "why");
        let saved = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":1}}"#;
        let re = with_id(saved, RequestId::String("r-1".into())).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&re).unwrap();
        assert_eq!(v["id"], "r-1");
        assert_eq!(v["params"]["x"], 1);
    }

    #[test]
    fn s_sess_3_session_ids_are_visible_ascii() {
        assert!(valid_session_id(b"abc-123_~", 64));
        assert!(!valid_session_id(b"a b", 64));
        assert!(!valid_session_id(b"", 64));
        assert!(!valid_session_id(b"abcdef", 3));
        assert!(!valid_session_id("é".as_bytes(), 64));
    }
}
