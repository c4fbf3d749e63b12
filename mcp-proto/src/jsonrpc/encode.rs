//! Serialization of envelopes straight into bytes, without a `serde_json::Value` round trip.
//!
//! Member order on the wire is `jsonrpc`, `id`, `method`, `params` for requests and
//! notifications, and `jsonrpc`, `id`, `result`/`error` for responses. Raw payloads are copied
//! verbatim. Strings are escaped minimally: `"`, `\` and the C0 controls, nothing else.

use std::convert::Infallible;

use bytes::Bytes;
use serde_json::value::RawValue;

use super::{ErrorObject, Message, Notification, Outcome, Request, RequestId, Response};

/// The escape of each C0 control character, indexed by its code.
const CONTROL_ESCAPES: [&str; 32] = [
    "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007", "\\b",
    "\\t", "\\n", "\\u000b", "\\f", "\\r", "\\u000e", "\\u000f", "\\u0010", "\\u0011", "\\u0012",
    "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017", "\\u0018", "\\u0019", "\\u001a",
    "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
];

/// Feeds `emit` the JSON escape of `s` (without the surrounding quotes) as a sequence of
/// `&str` pieces: unescaped runs of `s` itself, and escape sequences.
///
/// Every byte that needs an escape is ASCII, so each run boundary is a char boundary.
pub(crate) fn escape_pieces<E>(
    s: &str,
    mut emit: impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    let mut start = 0;
    for (i, &b) in s.as_bytes().iter().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0..=0x1f => CONTROL_ESCAPES[usize::from(b)],
            _ => continue,
        };
        if start < i {
            emit(&s[start..i])?;
        }
        emit(escape)?;
        start = i + 1;
    }
    if start < s.len() {
        emit(&s[start..])?;
    }
    Ok(())
}

/// Appends `s` as a JSON string literal.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let _: Result<(), Infallible> = escape_pieces(s, |piece| {
        out.extend_from_slice(piece.as_bytes());
        Ok(())
    });
    out.push(b'"');
}

/// Appends the decimal digits of `n`.
fn write_i64(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    let mut v = n.unsigned_abs();
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        // `v % 10` is below 10, so the cast is lossless.
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn write_id(out: &mut Vec<u8>, id: &RequestId) {
    match id {
        RequestId::Number(n) => write_i64(out, *n),
        RequestId::String(s) => write_str(out, s),
    }
}

const VERSION: &[u8] = br#"{"jsonrpc":"2.0""#;

fn write_request(out: &mut Vec<u8>, r: &Request) {
    out.extend_from_slice(VERSION);
    out.extend_from_slice(br#","id":"#);
    write_id(out, &r.id);
    out.extend_from_slice(br#","method":"#);
    write_str(out, &r.method);
    if let Some(params) = &r.params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(params.get().as_bytes());
    }
    out.push(b'}');
}

fn write_notification(out: &mut Vec<u8>, n: &Notification) {
    out.extend_from_slice(VERSION);
    out.extend_from_slice(br#","method":"#);
    write_str(out, &n.method);
    if let Some(params) = &n.params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(params.get().as_bytes());
    }
    out.push(b'}');
}

fn write_error_object(out: &mut Vec<u8>, e: &ErrorObject) {
    out.extend_from_slice(br#"{"code":"#);
    write_i64(out, e.code);
    out.extend_from_slice(br#","message":"#);
    write_str(out, &e.message);
    if let Some(data) = &e.data {
        out.extend_from_slice(br#","data":"#);
        out.extend_from_slice(data.get().as_bytes());
    }
    for (name, value) in &e.extra {
        out.push(b',');
        write_str(out, name);
        out.push(b':');
        // Writing a `serde_json::Value` into a `Vec` cannot fail.
        serde_json::to_writer(&mut *out, value).expect("a JSON value serializes");
    }
    out.push(b'}');
}

fn write_response(out: &mut Vec<u8>, r: &Response) {
    out.extend_from_slice(VERSION);
    if let Some(id) = &r.id {
        out.extend_from_slice(br#","id":"#);
        write_id(out, id);
    }
    match &r.outcome {
        Outcome::Result(result) => {
            out.extend_from_slice(br#","result":"#);
            out.extend_from_slice(result.get().as_bytes());
        }
        Outcome::Error(error) => {
            out.extend_from_slice(br#","error":"#);
            write_error_object(out, error);
        }
    }
    out.push(b'}');
}

/// Appends the JSON text of `m` to `out`.
pub(crate) fn write_message(out: &mut Vec<u8>, m: &Message) {
    match m {
        Message::Request(r) => write_request(out, r),
        Message::Notification(n) => write_notification(out, n),
        Message::Response(r) => write_response(out, r),
    }
}

const ENVELOPE: usize = 64;

fn raw_len(r: &Option<Box<RawValue>>) -> usize {
    r.as_ref().map_or(0, |r| r.get().len())
}

fn id_len(id: Option<&RequestId>) -> usize {
    match id {
        Some(RequestId::String(s)) => s.len() + 2,
        _ => 20,
    }
}

fn request_hint(r: &Request) -> usize {
    ENVELOPE + id_len(Some(&r.id)) + r.method.len() + raw_len(&r.params)
}

fn notification_hint(n: &Notification) -> usize {
    ENVELOPE + n.method.len() + raw_len(&n.params)
}

fn response_hint(r: &Response) -> usize {
    ENVELOPE
        + id_len(r.id.as_ref())
        + match &r.outcome {
            Outcome::Result(result) => result.get().len(),
            Outcome::Error(e) => ENVELOPE + e.message.len() + raw_len(&e.data),
        }
}

/// A capacity for the encoding of `m` that one allocation usually covers (escapes aside).
fn size_hint(m: &Message) -> usize {
    match m {
        Message::Request(r) => request_hint(r),
        Message::Notification(n) => notification_hint(n),
        Message::Response(r) => response_hint(r),
    }
}

fn encode_with(capacity: usize, write: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    let mut out = Vec::with_capacity(capacity);
    write(&mut out);
    Bytes::from(out)
}

/// Encodes one message.
pub(crate) fn message_to_bytes(m: &Message) -> Bytes {
    encode_with(size_hint(m), |out| write_message(out, m))
}

/// Encodes one request.
pub(crate) fn request_to_bytes(r: &Request) -> Bytes {
    encode_with(request_hint(r), |out| write_request(out, r))
}

/// Encodes one notification.
pub(crate) fn notification_to_bytes(n: &Notification) -> Bytes {
    encode_with(notification_hint(n), |out| write_notification(out, n))
}

/// Encodes one response.
pub(crate) fn response_to_bytes(r: &Response) -> Bytes {
    encode_with(response_hint(r), |out| write_response(out, r))
}

// S-RPC-11.
/// Encodes several messages as one JSON array, the 2025-03-26 batch.
///
/// The caller must not send an empty batch: `[]` is an invalid request (JSON-RPC 2.0 §6), and
/// [`parse_body`](super::parse_body) refuses it. This function still writes `[]` for an empty
/// slice rather than panic.
pub fn encode_batch(items: &[Message]) -> Bytes {
    let mut out = Vec::with_capacity(2 + items.iter().map(|m| size_hint(m) + 1).sum::<usize>());
    out.push(b'[');
    for (i, m) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_message(&mut out, m);
    }
    out.push(b']');
    Bytes::from(out)
}
