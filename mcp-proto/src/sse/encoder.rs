// S-SSE-17, S-SSE-12, S-SSE-18, S-SSE-6, S-SSE-16.
//! The `text/event-stream` encoder.
//!
//! # Theory of operation
//!
//! Encoding is the easy direction: an event becomes one self-contained frame, a run of
//! `field: value` lines closed by a blank line, returned as [`Bytes`] ready to be written as
//! one HTTP body chunk. The encoder only has to keep the frame *parseable back into the same
//! event* by any WHATWG decoder:
//!
//! - values never contain CR or LF, so data is split on every CR, LF and CRLF into one
//!   `data:` line per line (a decoder joins them again with LF, which means CR and CRLF in
//!   data come back as LF: the one lossy step, inherent to the format);
//! - a value starting with a space keeps it, because a space always follows the colon
//!   (`data: ` + value) and decoders strip exactly one;
//! - `id` must hold no CR, LF or NUL and `event` no CR or LF: those are rejected with
//!   [`SseEncodeError`] rather than silently producing a different event;
//! - `retry` is written in whole milliseconds.
//!
//! Lines are written in the order `id`, `event`, `retry`, `data`, which decoders do not
//! care about. A frame without data (`data` left unset) carries only its other fields and
//! dispatches no event on the receiving side, e.g. a lone `retry:`; a frame with
//! empty data writes `data:` and *is* dispatched, with data `""`: the MCP priming event
//! ([`encode_priming`]). Comments (`: text`) make keep-alive frames
//! ([`encode_comment`]).
//!
//! [`SseEncoder`] writes frames into one reusable [`BytesMut`] and splits each frame off it,
//! so a long stream of frames costs no allocation per frame once the frames are released;
//! the free functions use a fresh buffer each time.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use memchr::{memchr2, memchr3};

// S-SSE-17.
/// A value the encoder refuses, because no decoder could read it back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum SseEncodeError {
    /// The `id` contains CR, LF or NUL.
    #[error("SSE event id contains CR, LF or NUL")]
    InvalidId,
    /// The event type contains CR or LF.
    #[error("SSE event type contains CR or LF")]
    InvalidEventType,
}

/// An outgoing event, borrowed: built with chained setters, encoded with
/// [`encode`](Self::encode) or by an [`SseEncoder`].
///
/// ```
/// use mcp_proto::sse::SseFrame;
///
/// let frame = SseFrame::data(b"line 1\r\nline 2").id("s1/7").encode().unwrap();
/// assert_eq!(&frame[..], b"id: s1/7\ndata: line 1\ndata: line 2\n\n");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SseFrame<'a> {
    /// `id:` value (written even when empty: an empty `id:` resets the last event ID).
    pub id: Option<&'a str>,
    /// `event:` value.
    pub event: Option<&'a str>,
    /// `retry:` value, written in whole milliseconds (saturating at `u64::MAX`).
    pub retry: Option<Duration>,
    /// Data; `None` writes no `data:` line at all, `Some(b"")` writes `data:`.
    pub data: Option<&'a [u8]>,
}

impl<'a> SseFrame<'a> {
    /// An empty frame (encodes to a lone blank line).
    pub fn new() -> Self {
        Self::default()
    }

    /// A frame carrying `data`.
    pub fn data(data: &'a [u8]) -> Self {
        SseFrame {
            data: Some(data),
            ..Self::default()
        }
    }

    /// Sets the `id` field.
    pub fn id(mut self, id: &'a str) -> Self {
        self.id = Some(id);
        self
    }

    /// Sets the `event` field (the event type).
    pub fn event(mut self, event: &'a str) -> Self {
        self.event = Some(event);
        self
    }

    /// Sets the `retry` field.
    pub fn retry(mut self, retry: Duration) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Sets the data.
    pub fn with_data(mut self, data: &'a [u8]) -> Self {
        self.data = Some(data);
        self
    }

    // S-SSE-17.
    /// Checks that a decoder would read the frame back unchanged, without encoding.
    pub fn validate(&self) -> Result<(), SseEncodeError> {
        if let Some(id) = self.id
            && memchr3(b'\r', b'\n', 0, id.as_bytes()).is_some()
        {
            return Err(SseEncodeError::InvalidId);
        }
        if let Some(event) = self.event
            && memchr2(b'\r', b'\n', event.as_bytes()).is_some()
        {
            return Err(SseEncodeError::InvalidEventType);
        }
        Ok(())
    }

    /// The encoded length, exact when the data holds no line end (each line end adds a
    /// `data: ` prefix, at most 6 bytes, and a `retry` may be shorter than reserved).
    pub fn encoded_len_hint(&self) -> usize {
        let mut n = 1;
        if let Some(id) = self.id {
            n += 5 + id.len();
        }
        if let Some(event) = self.event {
            n += 8 + event.len();
        }
        if self.retry.is_some() {
            n += 8 + 20;
        }
        if let Some(data) = self.data {
            n += 7 + data.len();
        }
        n
    }

    /// Appends the frame to `out`. On error `out` is left unchanged.
    pub fn encode_into(&self, out: &mut BytesMut) -> Result<(), SseEncodeError> {
        self.validate()?;
        out.reserve(self.encoded_len_hint());
        if let Some(id) = self.id {
            put_field(out, b"id", id.as_bytes());
        }
        if let Some(event) = self.event {
            put_field(out, b"event", event.as_bytes());
        }
        if let Some(retry) = self.retry {
            let ms = u64::try_from(retry.as_millis()).unwrap_or(u64::MAX);
            out.put_slice(b"retry: ");
            out.put_slice(ms.to_string().as_bytes());
            out.put_u8(b'\n');
        }
        if let Some(data) = self.data {
            put_data(out, data);
        }
        out.put_u8(b'\n');
        Ok(())
    }

    /// Encodes the frame into a fresh buffer.
    pub fn encode(&self) -> Result<Bytes, SseEncodeError> {
        let mut out = BytesMut::new();
        self.encode_into(&mut out)?;
        Ok(out.freeze())
    }
}

/// Encodes an event frame: same as [`SseFrame::encode`].
pub fn encode_event(frame: &SseFrame<'_>) -> Result<Bytes, SseEncodeError> {
    frame.encode()
}

// S-SSE-16, S-SSE-6.
/// Encodes a comment frame, `: text` plus a blank line: a keep-alive frame (decoders ignore
/// it). Text containing line ends becomes several comment lines.
/// An empty text gives `:\n\n`.
pub fn encode_comment(text: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(text.len() + 4);
    put_comment(&mut out, text.as_bytes());
    out.freeze()
}

// S-SSE-18.
/// Encodes the MCP priming event: `id: <id>`, an optional `retry:`, and an empty
/// `data:`, which clients dispatch with data `""` and record the id of, for resumption.
pub fn encode_priming(id: &str, retry: Option<Duration>) -> Result<Bytes, SseEncodeError> {
    SseFrame {
        id: Some(id),
        event: None,
        retry,
        data: Some(b""),
    }
    .encode()
}

/// A frame writer that reuses one buffer for every frame (see the module docs).
#[derive(Debug, Default)]
pub struct SseEncoder {
    buf: BytesMut,
}

impl SseEncoder {
    /// A new encoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Encodes an event frame.
    pub fn event(&mut self, frame: &SseFrame<'_>) -> Result<Bytes, SseEncodeError> {
        frame.encode_into(&mut self.buf)?;
        Ok(self.buf.split().freeze())
    }

    /// Encodes a comment frame, as [`encode_comment`].
    pub fn comment(&mut self, text: &str) -> Bytes {
        put_comment(&mut self.buf, text.as_bytes());
        self.buf.split().freeze()
    }

    /// Encodes a priming event, as [`encode_priming`].
    pub fn priming(&mut self, id: &str, retry: Option<Duration>) -> Result<Bytes, SseEncodeError> {
        self.event(&SseFrame {
            id: Some(id),
            event: None,
            retry,
            data: Some(b""),
        })
    }
}

/// Writes `name: value\n` (`name:\n` for an empty value).
fn put_field(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    out.put_slice(name);
    out.put_u8(b':');
    if !value.is_empty() {
        out.put_u8(b' ');
        out.put_slice(value);
    }
    out.put_u8(b'\n');
}

// S-SSE-17.
/// Writes one `data:` line per line of `data`, splitting on CR, LF and CRLF.
fn put_data(out: &mut BytesMut, data: &[u8]) {
    let mut rest = data;
    loop {
        match memchr2(b'\r', b'\n', rest) {
            Some(i) => {
                put_field(out, b"data", &rest[..i]);
                let skip = if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                rest = &rest[i + skip..];
            }
            None => {
                put_field(out, b"data", rest);
                return;
            }
        }
    }
}

/// Writes `: line` per line of `text`, then a blank line.
fn put_comment(out: &mut BytesMut, text: &[u8]) {
    let mut rest = text;
    loop {
        let (line, next) = match memchr2(b'\r', b'\n', rest) {
            Some(i) => {
                let skip = if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                (&rest[..i], Some(&rest[i + skip..]))
            }
            None => (rest, None),
        };
        out.put_u8(b':');
        if !line.is_empty() {
            out.put_u8(b' ');
            out.put_slice(line);
        }
        out.put_u8(b'\n');
        match next {
            Some(next) => rest = next,
            None => break,
        }
    }
    out.put_u8(b'\n');
}
