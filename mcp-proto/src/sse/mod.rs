// S-SSE-1 … S-SSE-18 (the index's §15): S-SSE-2, S-SSE-3, S-SSE-15 … S-SSE-18 below.
//! The WHATWG `text/event-stream` codec: an incremental, bounded, linear-time decoder and a
//! frame encoder.
//!
//! # Theory of operation
//!
//! Server-Sent Events are the body format of every streamed MCP response (a POST answered
//! with `Content-Type: text/event-stream`, and the GET listening stream). The wire format is
//! defined by the WHATWG HTML Living Standard, "Parsing an event stream" and "Interpreting an
//! event stream"; where these docs say "step N", they mean that step of the standard's
//! "dispatch the event" algorithm.
//!
//! The module is sans-IO, in the style of h11's `receive_data` / `next_event`:
//!
//! - [`SseDecoder`] takes body bytes exactly as the transport read them —
//!   [`feed`](SseDecoder::feed) for borrowed slices, [`feed_bytes`](SseDecoder::feed_bytes)
//!   for owned [`Bytes`] chunks (zero-copy), [`finish`](SseDecoder::finish) at
//!   end of body — and hands out complete [`SseEvent`]s from
//!   [`next_event`](SseDecoder::next_event), `Ok(None)` meaning "need more data". Chunk
//!   boundaries never change the result: a CR at the end of one chunk followed by an LF at
//!   the start of the next is one line end, and a byte-order mark split over chunks
//!   is still stripped.
//! - [`SseFrame`] / [`SseEncoder`] turn an event into one [`Bytes`] frame, with
//!   multi-line data split into several `data:` lines; [`encode_comment`] makes the
//!   keep-alive comment frames and [`encode_priming`] the priming event of MCP's
//!   Streamable HTTP transport (2025-11-25).
//!
//! Memory is bounded by [`SseLimits`]: a line longer than
//! [`max_line_bytes`](SseLimits::max_line_bytes) or an event whose data exceeds
//! [`max_event_bytes`](SseLimits::max_event_bytes) fails with a typed [`SseError`], and the
//! decoder never buffers more than about one line plus one event's data on its own (what the
//! caller feeds before draining is the caller's to bound). Work is linear in the input: every
//! byte is scanned for CR/LF once, with `memchr2`, however small the chunks.
//!
//! What the decoder does *not* do: it does not JSON-parse data (the session layer does), it
//! does not reconnect (it only reports [`last_event_id`](SseDecoder::last_event_id) and
//! [`retry`](SseDecoder::retry), the inputs of the standard's
//! reconnection), and it does not filter event
//! types: [`SseEvent::is_message`] and [`SseEvent::is_priming`] tell the caller which events
//! MCP cares about.
//!
//! ```
//! use mcp_proto::sse::SseDecoder;
//!
//! let mut dec = SseDecoder::new();
//! dec.feed(b"id: 1\r\ndata: {\"jsonrpc\":\"2.0\"}\r");
//! assert_eq!(dec.next_event().unwrap(), None); // the event has not ended yet
//! dec.feed(b"\n\r\n");
//! let ev = dec.next_event().unwrap().unwrap();
//! assert_eq!(&ev.data[..], br#"{"jsonrpc":"2.0"}"#);
//! assert_eq!(ev.id.as_deref(), Some("1"));
//! assert_eq!(dec.last_event_id(), "1");
//! ```

use std::time::Duration;

use bytes::Bytes;

mod decoder;
mod encoder;
#[cfg(test)]
mod tests;

pub use decoder::SseDecoder;

/// The SSE event type a server writes (with no `id`) at the head of a resumed stream when
/// events after the client's `Last-Event-ID` were evicted before it came back: its data is
/// `{"lastEventId":"…"}`. MCP messages travel as `message` events, so clients that do not
/// know this type ignore it; this crate's client reports it as
/// [`ClientEvent::EventsLost`](crate::client::ClientEvent::EventsLost).
pub const EVENTS_LOST: &str = "events-lost";
pub use encoder::{
    SseEncodeError, SseEncoder, SseFrame, encode_comment, encode_event, encode_priming,
};

/// Memory bounds of an [`SseDecoder`].
///
/// Both default to 16 MiB. They may be set much lower (a few KiB is a sensible floor for
/// MCP traffic; any value, even 0, is accepted and simply rejects longer input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SseLimits {
    /// Longest accepted line, in bytes, not counting its line terminator (and not counting
    /// a stripped leading byte-order mark). Applies to every line: fields, comments, and
    /// unknown fields alike. A longer line fails with [`SseError::LineTooLong`] as soon as
    /// that many bytes without a line end have been seen, complete or not.
    pub max_line_bytes: usize,
    /// Largest accepted event data, in bytes: the `data` values of one event joined with LF
    /// (exactly the length [`SseEvent::data`] would have). Exceeding it fails with
    /// [`SseError::EventTooLarge`] when the offending `data` line ends.
    pub max_event_bytes: usize,
}

impl SseLimits {
    /// The default for both limits: 16 MiB.
    pub const DEFAULT_BYTES: usize = 16 * 1024 * 1024;
}

impl Default for SseLimits {
    fn default() -> Self {
        SseLimits {
            max_line_bytes: Self::DEFAULT_BYTES,
            max_event_bytes: Self::DEFAULT_BYTES,
        }
    }
}

// S-SSE-12, S-SSE-14, S-SSE-18.
/// One dispatched event.
///
/// Only events with a non-empty data *buffer* are dispatched, which includes `data:` alone
/// (data `""`, as in MCP's priming event). Blocks with no `data` field at
/// all (a lone `id:` or `retry:` followed by a blank line) are not events; their effect is
/// visible through [`SseDecoder::last_event_id`] and [`SseDecoder::retry`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SseEvent {
    // S-SSE-12, S-SSE-2.
    /// The event type: the last `event` field of the event, or `None` when there was none or
    /// it was empty (both mean `message`, step 4). Invalid UTF-8 is replaced with
    /// U+FFFD.
    pub event: Option<Box<str>>,
    // S-SSE-9, S-SSE-12.
    /// The data: every `data` value of the event, joined with LF, without the final LF
    /// (step 3). Bytes are passed through unchanged, even invalid UTF-8.
    /// A single-line event's data is a zero-copy slice of the input.
    pub data: Bytes,
    // S-SSE-12, S-SSE-10, S-SSE-15.
    /// The last event ID at dispatch, i.e. the decoder's
    /// [`last_event_id`](SseDecoder::last_event_id) right after this event's blank line, or
    /// `None` when that is empty.
    ///
    /// This is *not* only an `id:` line inside this event: the last event ID carries over
    /// from earlier events until an `id` field changes it (step 1), and an empty
    /// `id:` resets it to `None`. So this is exactly the value a client would
    /// send as `Last-Event-ID` if the stream broke right after this event.
    /// Invalid UTF-8 is replaced with U+FFFD.
    pub id: Option<Box<str>>,
    /// The reconnection time set by a valid `retry` field *within this event's lines* (since
    /// the previous blank line), if any. The decoder-wide value, which persists across
    /// events, is [`SseDecoder::retry`].
    pub retry: Option<Duration>,
}

impl SseEvent {
    // S-SSE-18.
    /// Whether the data is empty: an MCP priming event (`id: X` + `data:`), or any
    /// other empty-data event. Clients must not JSON-parse these.
    pub fn is_priming(&self) -> bool {
        self.data.is_empty()
    }

    // S-SSE-18.
    /// Whether the event type is absent or `message`: the only events Streamable HTTP
    /// defines. Events of other types should be ignored.
    pub fn is_message(&self) -> bool {
        matches!(self.event.as_deref(), None | Some("message"))
    }
}

/// Why an [`SseDecoder`] stopped.
///
/// Errors are sticky: once [`SseDecoder::next_event`] has returned one, it returns the same
/// error on every later call, further input is dropped, and buffers are released. The
/// stream cannot be trusted any more; the caller should drop the connection (and may
/// reconnect with the last event ID seen before the error).
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// A line exceeded [`SseLimits::max_line_bytes`].
    #[error("SSE line longer than the limit of {limit} bytes")]
    LineTooLong {
        /// The configured [`SseLimits::max_line_bytes`].
        limit: usize,
    },
    /// An event's data exceeded [`SseLimits::max_event_bytes`].
    #[error("SSE event data larger than the limit of {limit} bytes")]
    EventTooLarge {
        /// The configured [`SseLimits::max_event_bytes`].
        limit: usize,
    },
}
