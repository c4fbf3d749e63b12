//! Parsing: bytes → [`Body`] / [`Message`], reading only the envelope.
//!
//! ## Theory of operation
//!
//! Parsing is split into a *syntactic* pass and a *semantic* pass, so that every failure of
//! the first is a `-32700` and every failure of the second a `-32600`:
//!
//! 1. The body must be UTF-8 (checked up front with [`std::str::from_utf8`]: `serde_json`
//!    alone would let invalid bytes through inside skipped strings). One leading byte order
//!    mark is skipped (RFC 8259 §8.1 allows a parser to ignore it).
//! 2. The first non-blank byte picks the shape. `{`: one `serde_json` pass with a visitor that
//!    records each envelope member as a borrowed [`RawValue`] and skips unknown members with
//!    [`IgnoredAny`]. `[`: one pass that records each element as a borrowed `RawValue`, then
//!    the `{` pass on each element. Anything else: a pass that only validates the JSON. No
//!    visitor ever fails on types, so any `serde_json` error here is a syntax error.
//! 3. The recorded members are then interpreted by [`classify`], which never fails on syntax:
//!    a member of the wrong JSON type is an [`InvalidMessage`] with a precise
//!    [`InvalidReason`]. Only `jsonrpc`, `id`, `method` and the `error` object's `code` and
//!    `message` are decoded; `params`, `result` and `error.data` stay raw, copied once into
//!    their `Box<RawValue>`.
//!
//! Recording values as `RawValue` first (rather than deserializing `id` as a number, say)
//! keeps the split exact: `"id": 1e400` is valid JSON that `serde_json` cannot turn into a
//! number, and is reported as an invalid id, not as a parse error.
//!
//! **Nesting.** Skipping a value (`RawValue`, `IgnoredAny`) is iterative in `serde_json`, and
//! the visitors here never recurse, so no input can overflow the stack: deep nesting inside a
//! payload is accepted and forwarded as is, and deep nesting where an envelope was expected is
//! an invalid message. `serde_json`'s recursion limit (128) is never reached by this module;
//! it protects the typed layers that later deserialize the payloads.
//!
//! **Lone surrogates.** JSON's grammar allows `"\ud800"`, which no Rust string can hold. Inside
//! raw payloads it is forwarded untouched. In a member the envelope must decode (a member
//! name, `jsonrpc`, `method`, a string `id`, `error.message`) it is a parse error, like
//! invalid UTF-8.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer as _, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::{
    Body, DecodeError, ErrorObject, InvalidMessage, InvalidReason, Message, MessageKind,
    Notification, ParseFailure, Request, RequestId, Response,
};

// G-8.
/// Parses a whole body: one JSON-RPC message, or a 2025-03-26 batch.
///
/// Returns [`ParseFailure::Parse`] (`-32700`) when the bytes are not JSON: invalid UTF-8, a
/// syntax error, trailing bytes after the value, an empty body. Returns
/// [`ParseFailure::Invalid`] (`-32600`) when they are JSON but not a JSON-RPC 2.0 message:
/// see [`InvalidReason`] for each rule, and the module docs for the decisions.
///
/// A batch is `Ok` as soon as it is a non-empty JSON array: each element is parsed on its own
/// into a [`BatchItem`](super::BatchItem), so one bad element does not sink the others
/// (JSON-RPC 2.0 §6). The body is JSON as a whole or not at all: a syntax error anywhere,
/// inside an element included, makes the whole body a parse error.
///
/// The transport decides whether a batch is allowed (only 2025-03-26); use
/// [`parse_message`] where it is not.
pub fn parse_body(bytes: &[u8]) -> Result<Body, ParseFailure> {
    parse(bytes, true)
}

// S-POST-6.
/// Parses a body that must hold exactly one message (revisions 2025-06-18 and later).
///
/// Same rules as [`parse_body`]; a well-formed JSON array, `[]` included, is refused as
/// [`InvalidReason::BatchNotAllowed`] (`-32600`) without its elements being looked at.
pub fn parse_message(bytes: &[u8]) -> Result<Message, ParseFailure> {
    match parse(bytes, false)? {
        Body::Single(m) => Ok(m),
        // `parse` refuses arrays when batches are not allowed.
        Body::Batch(_) => Err(invalid(InvalidReason::BatchNotAllowed).into()),
    }
}

fn parse(bytes: &[u8], allow_batch: bool) -> Result<Body, ParseFailure> {
    // S-POST-4.
    let text = std::str::from_utf8(bytes).map_err(|e| {
        DecodeError::new(format!(
            "invalid UTF-8 at byte {} (MCP messages must be UTF-8)",
            e.valid_up_to()
        ))
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    match text
        .bytes()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        Some(b'{') => {
            let members = complete(text, |de| de.deserialize_map(MembersVisitor(&ENVELOPE)))?;
            Ok(Body::Single(classify(members)??))
        }
        Some(b'[') if allow_batch => {
            let elements = complete(text, |de| Vec::<&RawValue>::deserialize(de))?;
            if elements.is_empty() {
                return Err(invalid(InvalidReason::EmptyBatch).into());
            }
            let items = elements
                .into_iter()
                .map(parse_element)
                .collect::<Result<Vec<_>, DecodeError>>()?;
            Ok(Body::Batch(items))
        }
        Some(b'[') => {
            complete(text, |de| IgnoredAny::deserialize(de))?;
            Err(invalid(InvalidReason::BatchNotAllowed).into())
        }
        _ => {
            complete(text, |de| IgnoredAny::deserialize(de))?;
            Err(invalid(InvalidReason::NotAnObject).into())
        }
    }
}

fn invalid(reason: InvalidReason) -> InvalidMessage {
    InvalidMessage::new(reason, None, None)
}

/// Runs `f` on a deserializer over `text` and checks that only whitespace follows.
fn complete<'a, T>(
    text: &'a str,
    f: impl FnOnce(&mut serde_json::Deserializer<serde_json::de::StrRead<'a>>) -> serde_json::Result<T>,
) -> Result<T, DecodeError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = f(&mut de).and_then(|v| de.end().map(|()| v));
    value.map_err(|e| {
        // The visitors accept every JSON type, so only syntax (or EOF) errors can occur.
        debug_assert!(!e.is_data(), "type error from an accept-all visitor: {e}");
        DecodeError::new(e.to_string())
    })
}

/// One batch element (already known to be valid JSON).
fn parse_element(raw: &RawValue) -> Result<super::BatchItem, DecodeError> {
    if !raw.get().starts_with('{') {
        return Ok(Err(invalid(InvalidReason::NotAnObject)));
    }
    let members = complete(raw.get(), |de| {
        de.deserialize_map(MembersVisitor(&ENVELOPE))
    })?;
    classify(members)
}

// ---------------------------------------------------------------------------------------------
// Pass 1: record the members of an object as raw values.

/// The envelope members, in the order of the indices below.
const ENVELOPE: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];
/// The index of `id` in [`ENVELOPE`].
const ID: usize = 1;

/// The members of an error object.
const ERROR_OBJECT: [&str; 3] = ["code", "message", "data"];
const CODE: usize = 0;
const MESSAGE: usize = 1;
const DATA: usize = 2;
/// How [`InvalidReason::DuplicateMember`] names the error object's members.
const ERROR_OBJECT_NAMES: [&str; 3] = ["error.code", "error.message", "error.data"];

/// The known members of one JSON object, each recorded as a borrowed raw value; other members
/// are skipped. A repeated known member keeps its first value and is reported in `duplicate`.
struct Members<'a, const N: usize> {
    slots: [Option<&'a RawValue>; N],
    duplicate: Option<usize>,
}

/// Visits a JSON object, recording the members named in the table.
struct MembersVisitor<'t, const N: usize>(&'t [&'static str; N]);

impl<'de, const N: usize> Visitor<'de> for MembersVisitor<'_, N> {
    type Value = Members<'de, N>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Members {
            slots: [None; N],
            duplicate: None,
        };
        while let Some(key) = map.next_key_seed(KeySeed(self.0))? {
            let Some(index) = key else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let value: &'de RawValue = map.next_value()?;
            match members.slots[index] {
                None => members.slots[index] = Some(value),
                Some(_) => {
                    members.duplicate.get_or_insert(index);
                }
            }
        }
        Ok(members)
    }
}

/// Reads a member name and looks it up in the table: `Some(index)` or `None` (unknown).
/// Names are compared after unescaping, so `"\u006dethod"` is `method`.
struct KeySeed<'t, const N: usize>(&'t [&'static str; N]);

impl<'de, const N: usize> DeserializeSeed<'de> for KeySeed<'_, N> {
    type Value = Option<usize>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<const N: usize> Visitor<'_> for KeySeed<'_, N> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().position(|name| *name == v))
    }
}

// ---------------------------------------------------------------------------------------------
// Pass 2: interpret the raw members.

/// An `id` member, interpreted.
enum IdSlot {
    Absent,
    Null,
    Valid(RequestId),
    Invalid,
}

impl IdSlot {
    fn read(raw: Option<&RawValue>) -> Result<Self, DecodeError> {
        let Some(raw) = raw else {
            return Ok(Self::Absent);
        };
        if raw.get() == "null" {
            return Ok(Self::Null);
        }
        if let Some(s) = read_str(raw)? {
            return Ok(Self::Valid(RequestId::String(s.into())));
        }
        Ok(read_int(raw).map_or(Self::Invalid, |n| Self::Valid(RequestId::Number(n))))
    }

    fn valid(&self) -> Option<&RequestId> {
        match self {
            Self::Valid(id) => Some(id),
            _ => None,
        }
    }
}

/// The string a raw value holds, unescaped; `Ok(None)` when it is not a string.
///
/// `raw` is valid JSON, so the only possible failure is an escaped lone surrogate.
fn read_str(raw: &RawValue) -> Result<Option<Cow<'_, str>>, DecodeError> {
    let text = raw.get();
    let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) else {
        return Ok(None);
    };
    if memchr::memchr(b'\\', inner.as_bytes()).is_none() {
        return Ok(Some(Cow::Borrowed(inner)));
    }
    serde_json::from_str::<String>(text)
        .map(|s| Some(Cow::Owned(s)))
        .map_err(|e| DecodeError::new(format!("string is not valid Unicode: {e}")))
}

/// The integer a raw value holds; `None` when it is not a number written as an integer, or is
/// out of `i64` range. `raw` is valid JSON, so a leading `-` or digit means a number.
fn read_int(raw: &RawValue) -> Option<i64> {
    let text = raw.get();
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The result of [`classify`]: a parse error (outer), or the message or why it is invalid.
type Classified = Result<Result<Message, InvalidMessage>, DecodeError>;

/// Interprets the envelope members of one object.
///
/// Rules are checked in a fixed order and the first broken one is reported: duplicate
/// members, `jsonrpc`, then the shape (call or response), then the members of that shape.
fn classify(m: Members<'_, 6>) -> Classified {
    let [jsonrpc, id, method, params, result, error] = m.slots;
    let id = if m.duplicate == Some(ID) {
        IdSlot::Invalid
    } else {
        IdSlot::read(id)?
    };
    let kind = match (method.is_some(), result.is_some() || error.is_some()) {
        (true, false) if matches!(id, IdSlot::Absent) => Some(MessageKind::Notification),
        (true, false) => Some(MessageKind::Request),
        (false, true) => Some(MessageKind::Response),
        _ => None,
    };
    let fail = |reason, id: &IdSlot| -> Classified {
        Ok(Err(InvalidMessage::new(reason, id.valid().cloned(), kind)))
    };

    if let Some(index) = m.duplicate {
        return fail(InvalidReason::DuplicateMember(ENVELOPE[index]), &id);
    }
    match jsonrpc {
        None => return fail(InvalidReason::MissingVersion, &id),
        Some(v) if read_str(v)?.as_deref() != Some("2.0") => {
            return fail(InvalidReason::WrongVersion, &id);
        }
        Some(_) => {}
    }

    if let Some(method) = method {
        if result.is_some() || error.is_some() {
            return fail(InvalidReason::MethodWithOutcome, &id);
        }
        let Some(name) = read_str(method)? else {
            return fail(InvalidReason::MethodNotString, &id);
        };
        match id {
            IdSlot::Null => return fail(InvalidReason::NullRequestId, &id),
            IdSlot::Invalid => return fail(InvalidReason::InvalidId, &id),
            IdSlot::Absent | IdSlot::Valid(_) => {}
        }
        let params = match params {
            None => None,
            Some(p) if p.get() == "null" => None,
            Some(p) if p.get().starts_with('{') => Some(p.to_owned()),
            Some(_) => return fail(InvalidReason::ParamsNotObject, &id),
        };
        let method: Box<str> = name.into();
        return Ok(Ok(match id {
            IdSlot::Valid(id) => Message::Request(Request { id, method, params }),
            _ => Message::Notification(Notification { method, params }),
        }));
    }

    match (result, error) {
        (Some(_), Some(_)) => fail(InvalidReason::ResultAndError, &id),
        (None, None) => fail(InvalidReason::NoMethodOrOutcome, &id),
        (Some(result), None) => match id {
            IdSlot::Valid(id) => Ok(Ok(Message::Response(Response::result(
                id,
                result.to_owned(),
            )))),
            IdSlot::Absent | IdSlot::Null => fail(InvalidReason::ResultWithoutId, &id),
            IdSlot::Invalid => fail(InvalidReason::InvalidId, &id),
        },
        (None, Some(error)) => {
            let id = match id {
                IdSlot::Valid(id) => Some(id),
                IdSlot::Absent | IdSlot::Null => None,
                IdSlot::Invalid => return fail(InvalidReason::InvalidId, &id),
            };
            Ok(match read_error_object(error)? {
                Ok(error) => Ok(Message::Response(Response::error(id, error))),
                Err(reason) => Err(InvalidMessage::new(reason, id, kind)),
            })
        }
    }
}

/// Interprets an `error` member.
fn read_error_object(raw: &RawValue) -> Result<Result<ErrorObject, InvalidReason>, DecodeError> {
    if !raw.get().starts_with('{') {
        return Ok(Err(InvalidReason::ErrorNotObject));
    }
    let m = complete(raw.get(), |de| {
        de.deserialize_map(MembersVisitor(&ERROR_OBJECT))
    })?;
    if let Some(index) = m.duplicate {
        return Ok(Err(InvalidReason::DuplicateMember(
            ERROR_OBJECT_NAMES[index],
        )));
    }
    let Some(code) = m.slots[CODE].and_then(read_int) else {
        return Ok(Err(InvalidReason::ErrorCodeNotInteger));
    };
    let Some(message) = m.slots[MESSAGE].map(read_str).transpose()?.flatten() else {
        return Ok(Err(InvalidReason::ErrorMessageNotString));
    };
    Ok(Ok(ErrorObject {
        code,
        message: message.into(),
        data: m.slots[DATA].map(RawValue::to_owned),
        extra: serde_json::Map::new(),
    }))
}
