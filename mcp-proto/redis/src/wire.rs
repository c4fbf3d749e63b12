//! What the store keeps in Redis, as bytes and names: the key and channel names
//! ([`Keys`]), the record and bus message encodings (JSON), and the readers of the replies
//! that carry them (log entries, a request stream's state). Pure: no connection, no clock;
//! a value that does not decode is `None`, never a panic.

use std::fmt;
use std::io::Write as _;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use redis::{RedisWrite, ToRedisArgs, Value};
use serde::{Deserialize, Serialize};

use mcp_proto::jsonrpc::{Message, RequestId};
use mcp_proto::server::{BusMessage, LogEvent, SessionRecord, StreamEnd};

/// Key and channel names.
pub(crate) struct Keys {
    prefix: String,
}

/// A key or channel name: the prefix and the parts that follow it, written where it goes (a
/// command's buffer, a comparison) without an allocation of its own; `String::from` where one
/// is kept. (Every operation names five to eight keys: `format!` once cost a tenth of the
/// link's time, a `String` per key and the frees of them most of the rest.)
#[derive(Debug, Clone, Copy)]
pub(crate) struct Name<'a> {
    pieces: [&'a str; 5],
}

impl Name<'_> {
    fn len(&self) -> usize {
        self.pieces.iter().map(|p| p.len()).sum()
    }
}

impl fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.pieces.iter().try_for_each(|p| f.write_str(p))
    }
}

impl From<Name<'_>> for String {
    fn from(name: Name<'_>) -> String {
        let mut s = String::with_capacity(name.len());
        name.pieces.iter().for_each(|p| s.push_str(p));
        s
    }
}

impl PartialEq<str> for Name<'_> {
    fn eq(&self, other: &str) -> bool {
        let mut rest = other;
        for p in self.pieces {
            match rest.strip_prefix(p) {
                Some(r) => rest = r,
                None => return false,
            }
        }
        rest.is_empty()
    }
}

impl ToRedisArgs for Name<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        let mut w = out.writer_for_next_arg();
        for p in self.pieces {
            // Writes into memory, which do not fail.
            let _ = w.write_all(p.as_bytes());
        }
    }
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.into(),
        }
    }
    fn name<'a>(&'a self, parts: [&'a str; 4]) -> Name<'a> {
        let [a, b, c, d] = parts;
        Name {
            pieces: [&self.prefix, a, b, c, d],
        }
    }
    pub(crate) fn record<'a>(&'a self, s: &'a str) -> Name<'a> {
        self.name([":s:", s, "", ""])
    }
    pub(crate) fn sessions(&self) -> Name<'_> {
        self.name([":sessions", "", "", ""])
    }
    pub(crate) fn log<'a>(&'a self, s: &'a str) -> Name<'a> {
        self.name([":log:", s, "", ""])
    }
    pub(crate) fn meta<'a>(&'a self, s: &'a str) -> Name<'a> {
        self.name([":meta:", s, "", ""])
    }
    pub(crate) fn bus(&self) -> Name<'_> {
        self.name([":bus", "", "", ""])
    }
    pub(crate) fn wake<'a>(&'a self, s: &'a str) -> Name<'a> {
        self.name([":wake:", s, "", ""])
    }
    pub(crate) fn streams<'a>(&'a self, s: &'a str) -> Name<'a> {
        self.name([":rss:", s, "", ""])
    }
    pub(crate) fn stream_log<'a>(&'a self, s: &'a str, stream: &'a str) -> Name<'a> {
        self.name([":rs:", s, ":", stream])
    }
    pub(crate) fn stream_meta<'a>(&'a self, s: &'a str, stream: &'a str) -> Name<'a> {
        self.name([":rsm:", s, ":", stream])
    }
    pub(crate) fn stream_wake<'a>(&'a self, s: &'a str, stream: &'a str) -> Name<'a> {
        self.name([":rsw:", s, ":", stream])
    }
    /// A service record's hash (`v` version, `d` bytes, `o` owner).
    pub(crate) fn service_record<'a>(&'a self, key: &'a str) -> Name<'a> {
        self.name([":rec:", key, "", ""])
    }
    pub(crate) fn instances(&self) -> Name<'_> {
        self.name([":inst:", "", "", ""])
    }
    /// The liveness key of link `owner` (`<instance>:<incarnation>`).
    pub(crate) fn liveness<'a>(&'a self, owner: &'a str) -> Name<'a> {
        self.name([":inst:", owner, "", ""])
    }
    pub(crate) fn wake_session<'a>(&self, channel: &'a str) -> Option<&'a str> {
        channel
            .strip_prefix(self.prefix.as_str())?
            .strip_prefix(":wake:")
    }
}

/// A record as stored (JSON; the state in base64).
#[derive(Serialize, Deserialize)]
struct WireRecord {
    id: String,
    principal: Option<String>,
    version: String,
    state: Option<String>,
}

pub(crate) fn encode_record(r: &SessionRecord) -> Vec<u8> {
    let w = WireRecord {
        id: r.id.to_string(),
        principal: r.principal.as_deref().map(str::to_owned),
        version: r.version.as_str().to_owned(),
        state: r
            .state
            .as_ref()
            .map(|s| base64::engine::general_purpose::STANDARD.encode(s)),
    };
    serde_json::to_vec(&w).unwrap_or_default()
}

pub(crate) fn decode_record(session: &str, bytes: &[u8]) -> Option<SessionRecord> {
    let w: WireRecord = serde_json::from_slice(bytes).ok()?;
    if w.id != session {
        return None;
    }
    let state = match w.state {
        Some(s) => Some(Bytes::from(
            base64::engine::general_purpose::STANDARD.decode(s).ok()?,
        )),
        None => None,
    };
    Some(SessionRecord {
        id: w.id.into(),
        principal: w.principal.map(Into::into),
        version: mcp_proto::ProtocolVersion::parse(&w.version)?,
        state,
    })
}

/// A bus message as published: the sender's instance name, and the message.
#[derive(Serialize, Deserialize)]
struct WireBus {
    from: String,
    msg: WireMsg,
}

#[derive(Serialize, Deserialize)]
enum WireMsg {
    SessionDeleted {
        session: String,
    },
    Cancel {
        session: String,
        request: RequestId,
    },
    ClientResponse {
        instance: String,
        session: String,
        response: Box<serde_json::value::RawValue>,
    },
    ListenTaken {
        session: String,
        by: String,
    },
    SessionSaved {
        session: String,
    },
    StreamResumed {
        session: String,
        stream: String,
    },
    /// [`BusMessage::Notice`]: the payload in base64 (it is opaque bytes).
    Notice {
        from: String,
        payload: String,
    },
}

pub(crate) fn encode_bus(from: &str, message: &BusMessage) -> Option<Vec<u8>> {
    let msg = match message {
        BusMessage::SessionDeleted { session } => WireMsg::SessionDeleted {
            session: session.to_string(),
        },
        BusMessage::Cancel { session, request } => WireMsg::Cancel {
            session: session.to_string(),
            request: request.clone(),
        },
        BusMessage::ClientResponse {
            instance,
            session,
            response,
        } => {
            let text = String::from_utf8(response.to_bytes().to_vec()).ok()?;
            WireMsg::ClientResponse {
                instance: instance.to_string(),
                session: session.to_string(),
                response: serde_json::value::RawValue::from_string(text).ok()?,
            }
        }
        BusMessage::ListenTaken { session, by } => WireMsg::ListenTaken {
            session: session.to_string(),
            by: by.to_string(),
        },
        BusMessage::SessionSaved { session } => WireMsg::SessionSaved {
            session: session.to_string(),
        },
        BusMessage::StreamResumed { session, stream } => WireMsg::StreamResumed {
            session: session.to_string(),
            stream: stream.to_string(),
        },
        BusMessage::Notice { from, payload } => WireMsg::Notice {
            from: from.to_string(),
            payload: base64::engine::general_purpose::STANDARD.encode(payload),
        },
    };
    serde_json::to_vec(&WireBus {
        from: from.into(),
        msg,
    })
    .ok()
}

/// The sender and the message of a published bus message (`None`: malformed).
pub(crate) fn decode_bus(bytes: &[u8]) -> Option<(String, BusMessage)> {
    let w: WireBus = serde_json::from_slice(bytes).ok()?;
    let msg = match w.msg {
        WireMsg::SessionDeleted { session } => BusMessage::SessionDeleted {
            session: session.into(),
        },
        WireMsg::Cancel { session, request } => BusMessage::Cancel {
            session: session.into(),
            request,
        },
        WireMsg::ClientResponse {
            instance,
            session,
            response,
        } => match mcp_proto::jsonrpc::parse_message(response.get().as_bytes()).ok()? {
            Message::Response(response) => BusMessage::ClientResponse {
                instance: instance.into(),
                session: session.into(),
                response,
            },
            _ => return None,
        },
        WireMsg::ListenTaken { session, by } => BusMessage::ListenTaken {
            session: session.into(),
            by: by.into(),
        },
        WireMsg::SessionSaved { session } => BusMessage::SessionSaved {
            session: session.into(),
        },
        WireMsg::StreamResumed { session, stream } => BusMessage::StreamResumed {
            session: session.into(),
            stream: stream.into(),
        },
        WireMsg::Notice { from, payload } => BusMessage::Notice {
            from: from.into(),
            payload: Bytes::from(
                base64::engine::general_purpose::STANDARD
                    .decode(payload)
                    .ok()?,
            ),
        },
    };
    Some((w.from, msg))
}

/// The idle TTL as the scripts take it: ms, at least 1; 0 for none.
pub(crate) fn ttl_ms(ttl: Option<Duration>) -> u64 {
    ttl.map_or(0, |t| {
        u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1)
    })
}

/// A request stream as read: the events after the asked one (at most one batch), its end
/// (`None` while it runs, or while more events are left to read), and whether the batch was
/// full (read again).
#[derive(Debug)]
pub(crate) struct StreamRead {
    pub(crate) events: Vec<LogEvent>,
    pub(crate) end: Option<StreamEnd>,
    pub(crate) full: bool,
}

/// A bulk or simple string's bytes.
pub(crate) fn bulk(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// The entries of an `XRANGE` reply (`None`: malformed): ids `<seq>-0`, field `p`.
pub(crate) fn parse_entries(v: &Value) -> Option<Vec<LogEvent>> {
    let Value::Array(entries) = v else {
        return None;
    };
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(pair) = entry else {
            return None;
        };
        let [id, fields] = pair.as_slice() else {
            return None;
        };
        let id = std::str::from_utf8(bulk(id)?).ok()?;
        let (seq, zero) = id.split_once('-')?;
        if zero != "0" {
            return None;
        }
        let seq: u64 = seq.parse().ok()?;
        let field = |name: &[u8]| match fields {
            Value::Array(kv) => kv
                .chunks(2)
                .find(|c| c.len() == 2 && bulk(&c[0]) == Some(name))
                .and_then(|c| bulk(&c[1])),
            Value::Map(kv) => kv
                .iter()
                .find(|(k, _)| bulk(k) == Some(name))
                .and_then(|(_, v)| bulk(v)),
            _ => None,
        };
        let payload = field(b"p")?;
        out.push(LogEvent {
            seq,
            payload: Bytes::copy_from_slice(payload),
            gap: field(b"g") == Some(b"1"),
        });
    }
    Some(out)
}

/// The hash field naming an answered request: `a:` and the id's JSON.
pub(crate) fn answered_field(id: &RequestId) -> Option<String> {
    serde_json::to_string(id).ok().map(|j| format!("a:{j}"))
}

/// A `STREAM_READ` reply (`None`: malformed; `Some(None)`: no such stream).
pub(crate) fn parse_stream(v: &Value, batch: usize) -> Option<Option<StreamRead>> {
    let Value::Array(parts) = v else {
        return None;
    };
    match parts.as_slice() {
        [Value::Int(0)] => Some(None),
        [Value::Int(1), Value::Int(alive), hash, events] => {
            let fields: Vec<(&[u8], &[u8])> = match hash {
                Value::Array(kv) if kv.len() % 2 == 0 => kv
                    .chunks(2)
                    .map(|c| Some((bulk(&c[0])?, bulk(&c[1])?)))
                    .collect::<Option<_>>()?,
                Value::Map(kv) => kv
                    .iter()
                    .map(|(k, v)| Some((bulk(k)?, bulk(v)?)))
                    .collect::<Option<_>>()?,
                _ => return None,
            };
            let events = parse_entries(events)?;
            let full = events.len() >= batch;
            let finished = fields.iter().any(|(k, _)| *k == b"finished");
            let end = if full {
                None
            } else if finished {
                Some(StreamEnd::Finished)
            } else if *alive == 0 {
                let requests = fields.iter().find(|(k, _)| *k == b"requests")?.1;
                let requests: Vec<RequestId> = serde_json::from_slice(requests).ok()?;
                let answered: Vec<RequestId> = fields
                    .iter()
                    .filter_map(|(k, _)| k.strip_prefix(b"a:"))
                    .map(|j| serde_json::from_slice(j).ok())
                    .collect::<Option<_>>()?;
                let unanswered = requests
                    .into_iter()
                    .filter(|r| !answered.contains(r))
                    .collect();
                Some(StreamEnd::OwnerGone { unanswered })
            } else {
                None
            };
            Some(Some(StreamRead { events, end, full }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_reads_as_its_prefix_and_parts_end_to_end() {
        let k = Keys::new("p");
        let name = k.stream_wake("s1", "r9");
        assert_eq!(String::from(name), "p:rsw:s1:r9");
        assert_eq!(name.to_string(), "p:rsw:s1:r9");
        assert!(name == *"p:rsw:s1:r9");
        for other in [
            "p:rsw:s1:r",
            "p:rsw:s1:r99",
            "p:rsw:s1r9",
            "",
            "q:rsw:s1:r9",
        ] {
            assert!(name != *other, "{other}");
        }
        assert!(k.bus() == *"p:bus" && k.bus() != *"p:bus:");
        assert_eq!(
            redis::cmd("GET").arg(k.record("s1")).get_packed_command(),
            redis::cmd("GET").arg("p:s:s1").get_packed_command()
        );
    }

    #[test]
    fn records_and_bus_messages_round_trip_and_garbage_is_refused() {
        let r = SessionRecord {
            id: "abc".into(),
            principal: Some("alice".into()),
            version: mcp_proto::ProtocolVersion::V2025_03_26,
            state: Some(Bytes::from_static(b"\x00\xffstate")),
        };
        assert_eq!(decode_record("abc", &encode_record(&r)), Some(r.clone()));
        assert_eq!(decode_record("other", &encode_record(&r)), None);
        assert_eq!(decode_record("abc", b"{not json"), None);
        assert_eq!(
            decode_record(
                "abc",
                br#"{"id":"abc","principal":null,"version":"1999","state":null}"#
            ),
            None
        );
        let response = mcp_proto::jsonrpc::Response::result(
            RequestId::String("a.1".into()),
            serde_json::value::RawValue::from_string("{\"x\":1}".into()).unwrap(),
        );
        for m in [
            BusMessage::SessionDeleted {
                session: "s".into(),
            },
            BusMessage::Cancel {
                session: "s".into(),
                request: RequestId::Number(7),
            },
            BusMessage::ClientResponse {
                instance: "b".into(),
                session: "s".into(),
                response,
            },
            BusMessage::ListenTaken {
                session: "s".into(),
                by: "c".into(),
            },
            BusMessage::SessionSaved {
                session: "s".into(),
            },
            BusMessage::StreamResumed {
                session: "s".into(),
                stream: "b.7".into(),
            },
            BusMessage::Notice {
                from: "a".into(),
                payload: Bytes::from_static(b"{\"method\":\"x\"}\x00\xff"),
            },
        ] {
            let wire = encode_bus("a", &m).unwrap();
            assert_eq!(decode_bus(&wire), Some(("a".to_string(), m)));
        }
        assert_eq!(decode_bus(b"[]"), None);
        // A message of a newer version, or a notice whose payload is not base64: refused
        // (the worker logs it), never a panic.
        assert_eq!(decode_bus(br#"{"from":"a","msg":{"Later":{"x":1}}}"#), None);
        assert_eq!(
            decode_bus(br#"{"from":"a","msg":{"Notice":{"from":"a","payload":"%%"}}}"#),
            None
        );
        assert_eq!(
            decode_bus(br#"{"from":"a","msg":{"Notice":{"from":"a"}}}"#),
            None
        );
    }

    #[test]
    fn stream_reads_decode_their_end_and_garbage_is_refused() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let entry = |id: &str| Value::Array(vec![b(id), Value::Array(vec![b("p"), b("x")])]);
        let read = |alive: i64, hash: Vec<Value>, events: Vec<Value>| {
            Value::Array(vec![
                Value::Int(1),
                Value::Int(alive),
                Value::Array(hash),
                Value::Array(events),
            ])
        };
        let meta = |extra: &[(&str, &str)]| {
            let mut h = vec![b("owner"), b("b:1"), b("requests"), b(r#"[1,"two",3]"#)];
            for (k, v) in extra {
                h.push(b(k));
                h.push(b(v));
            }
            h
        };
        let end = |v: &Value, batch| {
            parse_stream(v, batch).map(|r| r.map(|r| (r.events.len(), r.end, r.full)))
        };
        assert_eq!(end(&Value::Array(vec![Value::Int(0)]), 8), Some(None));
        assert_eq!(
            end(&read(1, meta(&[]), vec![entry("1-0")]), 8),
            Some(Some((1, None, false)))
        );
        assert_eq!(
            end(&read(1, meta(&[("finished", "1")]), vec![]), 8),
            Some(Some((0, Some(StreamEnd::Finished), false)))
        );
        // The owner is gone: the requests not answered, in order.
        let answered = answered_field(&RequestId::String("two".into())).unwrap();
        assert_eq!(
            end(&read(0, meta(&[(&answered, "1")]), vec![]), 8),
            Some(Some((
                0,
                Some(StreamEnd::OwnerGone {
                    unanswered: vec![RequestId::Number(1), RequestId::Number(3)]
                }),
                false
            )))
        );
        // A full batch: no end yet (more to read first).
        assert_eq!(
            end(&read(0, meta(&[]), vec![entry("1-0"), entry("2-0")]), 2),
            Some(Some((2, None, true)))
        );
        for bad in [
            Value::Int(1),
            Value::Array(vec![Value::Int(2)]),
            read(0, vec![b("owner")], vec![]),
            read(0, vec![b("requests"), b("{not json")], vec![]),
            read(0, meta(&[("a:{bad", "1")]), vec![]),
            read(1, meta(&[]), vec![entry("1-1")]),
        ] {
            assert!(parse_stream(&bad, 8).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn malformed_log_entries_are_refused() {
        let entry = |id: &str, field: &str| {
            Value::Array(vec![
                Value::BulkString(id.as_bytes().to_vec()),
                Value::Array(vec![
                    Value::BulkString(field.as_bytes().to_vec()),
                    Value::BulkString(b"x".to_vec()),
                ]),
            ])
        };
        let ok = Value::Array(vec![entry("3-0", "p")]);
        assert_eq!(
            parse_entries(&ok),
            Some(vec![LogEvent {
                seq: 3,
                payload: Bytes::from_static(b"x"),
                gap: false,
            }])
        );
        // An entry after a lost message carries `g` = 1.
        let gap = Value::Array(vec![Value::Array(vec![
            Value::BulkString(b"4-0".to_vec()),
            Value::Array(vec![
                Value::BulkString(b"p".to_vec()),
                Value::BulkString(Vec::new()),
                Value::BulkString(b"g".to_vec()),
                Value::BulkString(b"1".to_vec()),
            ]),
        ])]);
        assert_eq!(
            parse_entries(&gap),
            Some(vec![LogEvent {
                seq: 4,
                payload: Bytes::new(),
                gap: true,
            }])
        );
        for bad in [
            Value::Array(vec![entry("3-1", "p")]),
            Value::Array(vec![entry("x-0", "p")]),
            Value::Array(vec![entry("3-0", "q")]),
            Value::Int(1),
        ] {
            assert_eq!(parse_entries(&bad), None, "{bad:?}");
        }
    }
}
