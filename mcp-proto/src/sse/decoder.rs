// S-SSE-2 … S-SSE-14.
//! The incremental `text/event-stream` decoder.
//!
//! # Theory of operation
//!
//! The decoder is the WHATWG event-stream parser (HTML Living Standard, "Parsing an event
//! stream" and "Interpreting an event stream") turned into a sans-IO pull machine. Input is pushed
//! with [`SseDecoder::feed`] / [`SseDecoder::feed_bytes`] and only *stored*; parsing happens lazily
//! in [`SseDecoder::next_event`], which runs until it can hand out one event or runs out of
//! complete lines. Nothing is parsed ahead of what the caller asks for, so the decoder holds no
//! queue of finished events, and an error surfaces exactly after the last good event before it.
//!
//! ## Input
//!
//! Not-yet-parsed input lives in three places, in stream order:
//!
//! 1. `buf`, a [`BytesMut`] of *copied* bytes: what [`feed`](SseDecoder::feed) copied in
//!    (and owned chunks of at most 32 bytes, for which a copy is cheaper than a reference
//!    count), and the incomplete last line of earlier chunks;
//! 2. `cur[pos..]`, the owned [`Bytes`] chunk being parsed;
//! 3. `queue`, owned chunks [`feed_bytes`](SseDecoder::feed_bytes) received while `cur` was
//!    still busy.
//!
//! A line that lies entirely inside one owned chunk is parsed in place; a single-line
//! event's data is then handed out as a [`Bytes::slice`] of that chunk: no copy. A line
//! that crosses a chunk boundary is assembled in `buf` (one copy of its bytes); once `buf`
//! holds a line end, `buf` is split off and frozen into a [`Bytes`] and parsed exactly like
//! an owned chunk, so there is one line parser, and data lines from `buf` are zero-copy too.
//! (A first line that needs no slice, i.e. an empty line, a comment or an `id:` / `event:` /
//! `retry:` field, is interpreted directly in `buf`, which spares the split for the many
//! short lines that tiny chunks deliver one at a time.)
//!
//! **Linearity.** Every byte is searched for CR/LF once. `scanned` records how much of
//! `buf` is known to hold no line end, and `eol_known` that `buf[scanned]` is one (both are
//! set while `feed` copies bytes in: the search runs over the caller's slice, before the
//! copy, because reading freshly copied bytes straight back stalls the CPU on store
//! forwarding). When `buf` is frozen for parsing, the position of its first line end is
//! passed along, so that line is not searched again; bytes after it were never searched.
//! Bytes arriving one at a time therefore cost O(1) each, and a line split over many chunks
//! is searched once and copied once.
//!
//! Two pieces of input state ride along: the byte-order-mark matcher (up to three bytes,
//! only at stream start), and `skip_lf`, set when a CR ended the available input so
//! that an LF arriving next completes that CRLF instead of making an empty line.
//!
//! ## States
//!
//! | state | input | action | next state |
//! |---|---|---|---|
//! | `Bom` (stream start) | bytes matching `EF BB BF` so far | hold them | `Bom` |
//! | `Bom` | all three BOM bytes | drop them | `Lines` |
//! | `Bom` | a byte breaking the match | release the held bytes as content | `Lines` |
//! | `Lines` | empty line | dispatch | `Lines` |
//! | `Lines` | `:` line | ignore | `Lines` |
//! | `Lines` | field line | apply `data`/`event`/`id`/`retry`, ignore others | `Lines` |
//! | `Lines` | CR as the last available byte | end the line | `AfterCr` |
//! | `AfterCr` | LF | swallow it | `Lines` |
//! | `AfterCr` | any other byte | parse it normally | `Lines` |
//! | any | line over the limit, data over the limit | report [`SseError`], drop buffers | `Failed` |
//! | any but `Failed` | [`finish`](SseDecoder::finish), then input drained | discard the incomplete line and event | `Finished` |
//! | `Failed` / `Finished` | anything | input ignored; `Failed` repeats its error | unchanged |
//!
//! ## Event state
//!
//! As the standard keeps them: the data buffer (`data_first` for the first line, kept as a
//! zero-copy slice, plus `data_buf` once a second line forces a copy), the event type buffer, and
//! the last event ID *buffer*, which becomes the last event ID *string* (`last_event_id`) at every
//! blank line, whether or not an event is dispatched (step 1 of "dispatch the event"). An `id`
//! field writes the buffer's new value into `id_buffer` and sets `id_dirty`; the blank line swaps
//! it into `last_event_id` (no copy); while `id_dirty` is clear, the buffer's value *is*
//! `last_event_id`. The data buffer stores values joined with LF, i.e. without the trailing LF that
//! step 3 would strip, so its length is exactly the dispatched data's length.
//!
//! ## Line dispatch
//!
//! Lines starting with `:`, `data:`, `id:`, `event:` and `retry:` (the forms servers write)
//! are recognized by their first bytes; every other line goes through the standard's general
//! rule (split at the first colon, or the whole line is the name). Both paths
//! apply the same field rules, so the shortcut changes speed, not results.
//!
//! ## Decisions beyond the standard
//!
//! - `retry`: only a non-empty run of ASCII digits that fits a `u64` of milliseconds counts;
//!   a value that overflows `u64` is **ignored** (as browsers do), not saturated.
//! - Errors are **sticky** (see [`SseError`]).
//! - Input fed after [`finish`](SseDecoder::finish) or after an error is ignored.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use memchr::{memchr, memchr2};

use super::{SseError, SseEvent, SseLimits};

/// Owned chunks up to this size are copied like borrowed ones.
const SMALL_CHUNK: usize = 32;

/// Smallest growth step of the line buffer.
const BUF_GROWTH: usize = 8 * 1024;

/// UTF-8 encoding of U+FEFF.
const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// Incremental, bounded WHATWG `text/event-stream` decoder (see the module docs).
///
/// Methods come in three kinds:
///
/// - **inputs**: [`feed`](Self::feed), [`feed_bytes`](Self::feed_bytes),
///   [`finish`](Self::finish) only store bytes (and are cheap);
/// - **output**: [`next_event`](Self::next_event) parses and returns the next event, or
///   `Ok(None)` when it needs more input (or, after `finish`, when the stream is over);
/// - **getters**: [`last_event_id`](Self::last_event_id), [`retry`](Self::retry),
///   [`is_finished`](Self::is_finished), [`buffered_len`](Self::buffered_len).
///
/// **After each input, call `next_event` until it returns `Ok(None)` or an error.** Feeding
/// more without draining is allowed and correct, but then the decoder holds everything fed.
#[derive(Debug)]
pub struct SseDecoder {
    limits: SseLimits,
    /// Owned chunks up to this size are copied ([`SMALL_CHUNK`]; tests lower it to reach the
    /// in-place path with short vectors).
    small_chunk: usize,
    input: Input,
    ev: EventState,
    /// [`finish`](Self::finish) was called.
    finished: bool,
    /// Sticky error.
    error: Option<SseError>,
}

/// Unparsed input, in stream order: `buf`, then `cur[pos..]`, then `queue`.
#[derive(Debug, Default)]
struct Input {
    /// Copied, not yet parsed bytes. Empty whenever `cur` is being parsed.
    buf: BytesMut,
    /// `buf[..scanned]` contains no CR and no LF.
    scanned: usize,
    /// `buf[scanned]` is known to be a CR or LF (found while copying the bytes in).
    eol_known: bool,
    /// The owned chunk being parsed; `cur[..pos]` is done.
    cur: Bytes,
    /// Parse position in `cur`.
    pos: usize,
    /// Owned chunks waiting behind `cur`.
    queue: VecDeque<Bytes>,
    /// How many bytes of a leading BOM were matched (and held back) so far.
    bom_matched: u8,
    /// The stream-start BOM question is settled.
    bom_done: bool,
    /// A CR ended the input seen so far: an LF coming next is part of that line end.
    skip_lf: bool,
}

// S-SSE-4.
/// The event being assembled and the stream-wide results.
#[derive(Debug, Default)]
struct EventState {
    /// The first `data` value: a zero-copy slice while the event has only one data line.
    data_first: Bytes,
    /// The joined data, once a second `data` line arrived.
    data_buf: BytesMut,
    /// Number of `data` lines so far (saturating; only 0, 1 and "more" matter).
    data_lines: usize,
    /// Length of the joined data so far.
    data_len: usize,
    /// Event type buffer.
    event_type: String,
    /// The last event ID buffer, *if* an `id` field changed it since the last blank line
    /// (`id_dirty`); otherwise the buffer equals `last_event_id` and this is stale scratch.
    id_buffer: String,
    /// `id_buffer` holds the buffer's value.
    id_dirty: bool,
    /// A valid `retry` seen since the last blank line.
    event_retry: Option<Duration>,
    /// The last event ID string, set from the buffer at each blank line.
    last_event_id: String,
    /// The reconnection time, from the last valid `retry` field.
    retry: Option<Duration>,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with the default [`SseLimits`] (16 MiB each).
    pub fn new() -> Self {
        Self::with_limits(SseLimits::default())
    }

    /// A decoder with the given limits.
    pub fn with_limits(limits: SseLimits) -> Self {
        SseDecoder {
            limits,
            small_chunk: SMALL_CHUNK,
            input: Input::default(),
            ev: EventState::default(),
            finished: false,
            error: None,
        }
    }

    /// Sets the size up to which owned chunks are copied (tests and fuzzing: 0 sends every
    /// owned chunk through the in-place path).
    #[cfg(any(test, fuzzing, feature = "fuzzing"))]
    pub(crate) fn with_small_chunk(mut self, max: usize) -> Self {
        self.small_chunk = max;
        self
    }

    /// The limits this decoder enforces.
    pub fn limits(&self) -> SseLimits {
        self.limits
    }

    // ------------------------------------------------------------------------------------
    // Inputs
    // ------------------------------------------------------------------------------------

    /// Stores a borrowed chunk of the body. The bytes are copied (into the internal line
    /// buffer, or into an owned chunk if earlier owned chunks are still unparsed).
    ///
    /// Ignored after [`finish`](Self::finish) or an error. Empty chunks are no-ops.
    #[inline]
    pub fn feed(&mut self, chunk: &[u8]) {
        if chunk.is_empty() || self.finished || self.error.is_some() {
            return;
        }
        let mut chunk = chunk;
        if !self.input.bom_done {
            let skip = self.input.match_bom(chunk);
            if !self.input.bom_done {
                return;
            }
            chunk = &chunk[skip..];
        }
        self.input.push_slice(chunk);
    }

    /// Stores an owned chunk of the body without copying it: complete lines inside the chunk
    /// are parsed in place, and a single-line event's data is a slice of `chunk`. Only a line
    /// that continues into the next chunk is copied, and chunks of at most 32 bytes, for
    /// which a copy is cheaper than reference counting.
    ///
    /// Ignored after [`finish`](Self::finish) or an error. Empty chunks are no-ops.
    pub fn feed_bytes(&mut self, mut chunk: Bytes) {
        if chunk.is_empty() || self.finished || self.error.is_some() {
            return;
        }
        let input = &mut self.input;
        if !input.bom_done {
            let skip = input.match_bom(&chunk);
            if !input.bom_done {
                return;
            }
            chunk.advance(skip);
            if chunk.is_empty() {
                return;
            }
        }
        if input.cur_is_empty() && input.queue.is_empty() {
            if chunk.len() <= self.small_chunk {
                input.push_slice(&chunk);
            } else {
                input.cur = chunk;
                input.pos = 0;
            }
        } else {
            input.queue.push_back(chunk);
        }
    }

    // S-SSE-13.
    /// Marks the end of the body. Complete events already fed are still returned by
    /// [`next_event`](Self::next_event); an incomplete last line and an event without its
    /// closing blank line are discarded. Idempotent.
    pub fn finish(&mut self) {
        if !self.input.bom_done {
            // A partial BOM at the very end is an incomplete line: discarded.
            self.input.bom_done = true;
            self.input.bom_matched = 0;
        }
        self.finished = true;
    }

    // ------------------------------------------------------------------------------------
    // Output
    // ------------------------------------------------------------------------------------

    // S-SSE-12.
    /// Parses up to the next dispatched event.
    ///
    /// - `Ok(Some(event))`: an event; call again, more may be buffered.
    /// - `Ok(None)`: every complete line has been parsed; feed more input. After
    ///   [`finish`](Self::finish), `Ok(None)` means the stream is over.
    /// - `Err(e)`: a limit was exceeded. Sticky: every later call returns the same error.
    #[inline]
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, SseError> {
        if let Some(err) = &self.error {
            return Err(err.clone());
        }
        match self.advance() {
            Ok(event) => Ok(event),
            Err(err) => {
                self.fail(err.clone());
                Err(err)
            }
        }
    }

    // ------------------------------------------------------------------------------------
    // Getters
    // ------------------------------------------------------------------------------------

    // S-SSE-12, S-SSE-10, S-SSE-15.
    /// The last event ID string (step 1 of "dispatch the event"): the last event ID buffer as of
    /// the most recent blank line, whether or not that blank line dispatched an event. `""` until
    /// an `id` field and a blank line were seen, and after an empty `id:`. This is the value to
    /// send as `Last-Event-ID` when non-empty.
    pub fn last_event_id(&self) -> &str {
        &self.ev.last_event_id
    }

    // S-SSE-11.
    /// The reconnection time of the last valid `retry` field seen, applied as soon
    /// as its line is parsed. `None` if there was none.
    pub fn retry(&self) -> Option<Duration> {
        self.ev.retry
    }

    /// Whether the stream is over: [`finish`](Self::finish) was called and
    /// [`next_event`](Self::next_event) has consumed all input (it returned `Ok(None)`), or
    /// the decoder failed with an error.
    pub fn is_finished(&self) -> bool {
        self.error.is_some()
            || (self.finished
                && self.input.buf.is_empty()
                && self.input.cur_is_empty()
                && self.input.queue.is_empty())
    }

    /// How many bytes of input and of the event being assembled the decoder holds:
    /// unparsed input, plus the event's data and event type buffers. (The last event ID and
    /// its buffer, stream-wide state of at most one line each, are not counted.)
    ///
    /// Whenever [`next_event`](Self::next_event) has just returned `Ok(None)`, this is at
    /// most [`SseLimits::max_line_bytes`] (the incomplete last line) plus
    /// [`SseLimits::max_event_bytes`] (the data) plus three times `max_line_bytes` (the event
    /// type, which U+FFFD replacement can grow up to threefold). It is 0 after an error and
    /// once [`is_finished`](Self::is_finished).
    pub fn buffered_len(&self) -> usize {
        let input = &self.input;
        input.buf.len()
            + (input.cur.len() - input.pos)
            + input.queue.iter().map(Bytes::len).sum::<usize>()
            + self.ev.data_first.len()
            + self.ev.data_buf.len()
            + self.ev.event_type.len()
    }

    // ------------------------------------------------------------------------------------
    // Plumbing
    // ------------------------------------------------------------------------------------

    /// Drops all buffers and records the sticky error.
    #[cold]
    fn fail(&mut self, err: SseError) {
        self.error = Some(err);
        self.input.buf = BytesMut::new();
        self.input.scanned = 0;
        self.input.eol_known = false;
        self.input.cur = Bytes::new();
        self.input.pos = 0;
        self.input.queue = VecDeque::new();
        self.ev.reset_event();
        self.ev.data_buf = BytesMut::new();
        self.ev.event_type = String::new();
        self.ev.id_buffer = String::new();
        self.ev.id_dirty = false;
    }

    // S-SSE-13.
    /// Out of complete lines. At end of stream, discards the incomplete line and the
    /// undispatched event.
    #[inline(always)]
    fn need_more(&mut self) {
        if self.finished {
            self.end_of_stream();
        }
    }

    /// See [`need_more`](Self::need_more).
    #[cold]
    fn end_of_stream(&mut self) {
        self.input.buf.clear();
        self.input.scanned = 0;
        self.input.eol_known = false;
        self.input.skip_lf = false;
        self.ev.reset_event();
        // The id buffer of an undispatched event never reached the last event ID string.
        self.ev.id_dirty = false;
    }

    // ------------------------------------------------------------------------------------
    // Parsing
    // ------------------------------------------------------------------------------------

    /// The body of [`next_event`](Self::next_event), without the sticky-error wrapper.
    #[inline(always)]
    fn advance(&mut self) -> Result<Option<SseEvent>, SseError> {
        let max_line = self.limits.max_line_bytes;
        loop {
            let input = &mut self.input;
            let hint = if input.buf.is_empty() {
                if input.cur_is_empty() && !input.next_chunk() {
                    self.need_more();
                    return Ok(None);
                }
                0
            } else {
                if input.skip_lf {
                    // `buf` only fills after the CR was consumed, so this is the next byte.
                    input.skip_lf = false;
                    if input.buf[0] == b'\n' {
                        debug_assert_eq!(input.scanned, 0);
                        input.buf.advance(1);
                        continue;
                    }
                }
                let eol = if input.eol_known {
                    Some(0)
                } else {
                    find_eol(&input.buf[input.scanned..])
                };
                if let Some(i) = eol {
                    let first_end = input.scanned + i;
                    if first_end > max_line {
                        return Err(SseError::LineTooLong { limit: max_line });
                    }
                    // A first line that needs no zero-copy slice (not a data line) is
                    // interpreted right in `buf`, sparing the split and freeze.
                    if let Some(event) = self.ev.try_line_in_place(&mut self.input, first_end) {
                        match event {
                            Some(event) => return Ok(Some(event)),
                            None => continue,
                        }
                    }
                    let input = &mut self.input;
                    // `buf` holds at least one complete line: parse it like an owned chunk.
                    let chunk = input.buf.split().freeze();
                    input.scanned = 0;
                    input.eol_known = false;
                    if !input.cur_is_empty() {
                        let mut behind = std::mem::take(&mut input.cur);
                        behind.advance(input.pos);
                        input.queue.push_front(behind);
                    }
                    input.cur = chunk;
                    input.pos = 0;
                    first_end
                } else {
                    // `buf` is one incomplete line; extend it from the owned chunks.
                    input.scanned = input.buf.len();
                    if input.scanned > max_line {
                        return Err(SseError::LineTooLong { limit: max_line });
                    }
                    if input.cur_is_empty() && !input.next_chunk() {
                        self.need_more();
                        return Ok(None);
                    }
                    let rest = &input.cur[input.pos..];
                    match find_eol(rest) {
                        Some(j) => {
                            if input.buf.len() + j > max_line {
                                return Err(SseError::LineTooLong { limit: max_line });
                            }
                            // Take the line end along, both bytes of a CRLF if present.
                            let take = if rest[j] == b'\r' && rest.get(j + 1) == Some(&b'\n') {
                                j + 2
                            } else {
                                j + 1
                            };
                            buf_extend(&mut input.buf, &rest[..take]);
                            input.pos += take;
                            // The line end is at `scanned + j`: no rescan before it.
                            input.scanned += j;
                            input.eol_known = true;
                        }
                        None => {
                            if input.buf.len() + rest.len() > max_line {
                                return Err(SseError::LineTooLong { limit: max_line });
                            }
                            buf_extend(&mut input.buf, rest);
                            input.cur = Bytes::new();
                            input.pos = 0;
                            input.scanned = input.buf.len();
                        }
                    }
                    continue;
                }
            };
            if let Some(event) = self.parse_cur(hint)? {
                return Ok(Some(event));
            }
        }
    }

    /// The line loop: parses complete lines of `cur[pos..]` (with `buf` empty) until an
    /// event is dispatched or the chunk is used up; an incomplete last line moves into `buf`.
    /// `hint`: the first line holds no line end before this offset of `cur`.
    #[inline(always)]
    fn parse_cur(&mut self, hint: usize) -> Result<Option<SseEvent>, SseError> {
        let limits = self.limits;
        let input = &mut self.input;
        let ev = &mut self.ev;
        debug_assert!(input.buf.is_empty());
        let chunk = &input.cur;
        let s: &[u8] = chunk;
        let mut pos = input.pos;
        if input.skip_lf && pos < s.len() {
            input.skip_lf = false;
            if s[pos] == b'\n' {
                pos += 1;
            }
        }
        let mut scan_from = hint.max(pos);
        while pos < s.len() {
            // Find the line end; empty lines (the event ends) are common enough for a
            // shortcut before the search.
            let end = match s[scan_from] {
                b'\n' | b'\r' => scan_from,
                _ => match find_eol(&s[scan_from..]) {
                    Some(i) => scan_from + i,
                    None => {
                        // Incomplete last line: keep it for the next chunk.
                        let tail = &s[pos..];
                        if tail.len() > limits.max_line_bytes {
                            return Err(SseError::LineTooLong {
                                limit: limits.max_line_bytes,
                            });
                        }
                        buf_extend(&mut input.buf, tail);
                        input.scanned = input.buf.len();
                        input.cur = Bytes::new();
                        input.pos = 0;
                        return Ok(None);
                    }
                },
            };
            if end - pos > limits.max_line_bytes {
                return Err(SseError::LineTooLong {
                    limit: limits.max_line_bytes,
                });
            }
            // S-SSE-3: CRLF, LF, or CR; a CR ending the chunk may still be followed by LF.
            let mut next = end + 1;
            if s[end] == b'\r' {
                match s.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => input.skip_lf = true,
                }
            }
            if end == pos {
                // S-SSE-5: an empty line dispatches. The event is built right here, in the
                // return expression, which spares a copy of it.
                pos = next;
                scan_from = next;
                if ev.has_data() {
                    if pos < s.len() {
                        input.pos = pos;
                    } else {
                        input.cur = Bytes::new();
                        input.pos = 0;
                    }
                    return Ok(Some(ev.dispatch()));
                }
                ev.dispatch_nothing();
                continue;
            }
            ev.process_line(chunk, pos, end, limits.max_event_bytes)?;
            pos = next;
            scan_from = next;
        }
        input.cur = Bytes::new();
        input.pos = 0;
        Ok(None)
    }
}

impl Input {
    #[inline]
    fn cur_is_empty(&self) -> bool {
        self.pos >= self.cur.len()
    }

    /// Makes the next queued chunk current; false if there is none.
    #[inline(always)]
    fn next_chunk(&mut self) -> bool {
        match self.queue.pop_front() {
            Some(chunk) => {
                self.cur = chunk;
                self.pos = 0;
                true
            }
            None => false,
        }
    }

    // S-SSE-2.
    /// Runs the stream-start BOM matcher over the start of `chunk`. Returns how
    /// many bytes of `chunk` belong to a complete BOM (to be dropped). While the question is
    /// open (`!self.bom_done`), the matched bytes are held back; when a byte breaks the match,
    /// the bytes held from *earlier* chunks are released as content before `chunk`, which is
    /// then content from its first byte.
    #[cold]
    fn match_bom(&mut self, chunk: &[u8]) -> usize {
        let mut i = 0;
        while usize::from(self.bom_matched) < BOM.len() {
            let Some(&b) = chunk.get(i) else {
                return i;
            };
            if b == BOM[usize::from(self.bom_matched)] {
                self.bom_matched += 1;
                i += 1;
            } else {
                self.bom_done = true;
                let earlier = usize::from(self.bom_matched) - i;
                self.bom_matched = 0;
                self.push_slice(&BOM[..earlier]);
                return 0;
            }
        }
        self.bom_done = true;
        self.bom_matched = 0;
        i
    }

    /// Appends borrowed content behind everything already stored.
    ///
    /// When everything in `buf` has been scanned already, `s` is scanned here, in the
    /// caller's memory, before the copy: reading freshly copied bytes back right away
    /// stalls on store forwarding, which dominated the cost of tiny chunks.
    #[inline]
    fn push_slice(&mut self, s: &[u8]) {
        if s.is_empty() {
            return;
        }
        if self.cur_is_empty() && self.queue.is_empty() {
            if !self.skip_lf && !self.eol_known && self.scanned == self.buf.len() {
                match find_eol(s) {
                    Some(i) => {
                        self.scanned += i;
                        self.eol_known = true;
                    }
                    None => self.scanned += s.len(),
                }
            }
            buf_extend(&mut self.buf, s);
        } else {
            self.queue.push_back(Bytes::copy_from_slice(s));
        }
    }
}

impl EventState {
    /// Forgets the event being assembled (not the id buffer, which outlives events).
    fn reset_event(&mut self) {
        self.data_first = Bytes::new();
        self.data_buf.clear();
        self.data_lines = 0;
        self.data_len = 0;
        self.event_type.clear();
        self.event_retry = None;
    }

    // S-SSE-6 … S-SSE-11.
    /// Interprets one non-empty line, `chunk[start..end]`.
    #[inline(always)]
    fn process_line(
        &mut self,
        chunk: &Bytes,
        start: usize,
        end: usize,
        max_event: usize,
    ) -> Result<(), SseError> {
        let line = &chunk[start..end];
        // Shortcuts for comments and the four known fields written the usual way; anything
        // else takes the general path.
        match line.first() {
            // S-SSE-6: comment.
            Some(b':') => Ok(()),
            Some(b'd') if line.starts_with(b"data:") => {
                self.push_data(chunk, value_start(line, start, 5), end, max_event)
            }
            Some(b'i') if line.starts_with(b"id:") => {
                self.set_id(&chunk[value_start(line, start, 3)..end]);
                Ok(())
            }
            Some(b'e') if line.starts_with(b"event:") => {
                self.set_event(&chunk[value_start(line, start, 6)..end]);
                Ok(())
            }
            Some(b'r') if line.starts_with(b"retry:") => {
                self.set_retry(&chunk[value_start(line, start, 6)..end]);
                Ok(())
            }
            _ => self.process_other_line(chunk, start, end, max_event),
        }
    }

    /// Interprets the first line of `input.buf`, which ends at `end`, in place when it is an
    /// empty line, a comment, or an `id:` / `event:` / `retry:` field: lines that need no
    /// zero-copy slice. Returns `None` for other lines (left untouched), else whether an event
    /// was dispatched, with the line and its end consumed.
    #[inline(always)]
    fn try_line_in_place(&mut self, input: &mut Input, end: usize) -> Option<Option<SseEvent>> {
        let line = &input.buf[..end];
        match line.first() {
            None | Some(b':') => {}
            Some(b'i') if line.starts_with(b"id:") => {
                self.set_id(&line[value_start(line, 0, 3)..]);
            }
            Some(b'e') if line.starts_with(b"event:") => {
                self.set_event(&line[value_start(line, 0, 6)..]);
            }
            Some(b'r') if line.starts_with(b"retry:") => {
                self.set_retry(&line[value_start(line, 0, 6)..]);
            }
            _ => return None,
        }
        let event = if end > 0 {
            None
        } else if self.has_data() {
            Some(self.dispatch())
        } else {
            self.dispatch_nothing();
            None
        };
        // S-SSE-3: CRLF, LF, or CR; a CR ending the input may still be followed by LF.
        let mut next = end + 1;
        if input.buf[end] == b'\r' {
            match input.buf.get(next) {
                Some(b'\n') => next += 1,
                Some(_) => {}
                None => input.skip_lf = true,
            }
        }
        input.buf.advance(next);
        // Bytes after this line were never searched.
        input.scanned = 0;
        input.eol_known = false;
        Some(event)
    }

    // S-SSE-7 … S-SSE-11.
    /// The general field path: field name up to the first colon, or
    /// the whole line; names are case-sensitive and unknown ones ignored.
    #[inline(never)]
    fn process_other_line(
        &mut self,
        chunk: &Bytes,
        start: usize,
        end: usize,
        max_event: usize,
    ) -> Result<(), SseError> {
        let line = &chunk[start..end];
        let (name, value_start) = match memchr(b':', line) {
            Some(colon) => (&line[..colon], value_start(line, start, colon + 1)),
            None => (line, end),
        };
        let value = &chunk[value_start..end];
        match name {
            b"data" => self.push_data(chunk, value_start, end, max_event)?,
            b"event" => self.set_event(value),
            b"id" => self.set_id(value),
            b"retry" => self.set_retry(value),
            _ => {}
        }
        Ok(())
    }

    // S-SSE-9.
    /// `event`: the event type buffer takes the value.
    #[inline]
    fn set_event(&mut self, value: &[u8]) {
        self.event_type.clear();
        push_lossy(&mut self.event_type, value);
    }

    // S-SSE-10.
    /// `id`: the last event ID buffer takes the value, unless it holds a NUL.
    #[inline]
    fn set_id(&mut self, value: &[u8]) {
        if !value.contains(&0) {
            self.id_buffer.clear();
            push_lossy(&mut self.id_buffer, value);
            self.id_dirty = true;
        }
    }

    // S-SSE-11.
    /// `retry`: digits only, else ignored.
    #[inline]
    fn set_retry(&mut self, value: &[u8]) {
        if let Some(ms) = parse_retry(value) {
            let retry = Duration::from_millis(ms);
            self.retry = Some(retry);
            self.event_retry = Some(retry);
        }
    }

    // S-SSE-9.
    /// `data`: appends the value `chunk[start..end]` to the data buffer, keeping
    /// the first line as a zero-copy slice.
    #[inline]
    fn push_data(
        &mut self,
        chunk: &Bytes,
        start: usize,
        end: usize,
        limit: usize,
    ) -> Result<(), SseError> {
        let add = end - start;
        if self.data_lines == 0 {
            if add > limit {
                return Err(SseError::EventTooLarge { limit });
            }
            if add > 0 {
                self.data_first = chunk.slice(start..end);
            }
            self.data_len = add;
        } else {
            let new_len = self.data_len + 1 + add;
            if new_len > limit {
                return Err(SseError::EventTooLarge { limit });
            }
            if self.data_lines == 1 {
                // Second line: now the data must be copied together.
                self.data_buf.reserve(new_len);
                self.data_buf.extend_from_slice(&self.data_first);
                self.data_first = Bytes::new();
            }
            self.data_buf.put_u8(b'\n');
            self.data_buf.extend_from_slice(&chunk[start..end]);
            self.data_len = new_len;
        }
        self.data_lines = self.data_lines.saturating_add(1);
        Ok(())
    }

    /// Whether the data buffer is non-empty, i.e. the next blank line dispatches.
    #[inline(always)]
    fn has_data(&self) -> bool {
        self.data_lines > 0
    }

    // S-SSE-12.
    /// Step 1 of "dispatch the event": the last event ID string takes the buffer's value,
    /// dispatch or not.
    #[inline(always)]
    fn commit_id(&mut self) {
        if self.id_dirty {
            std::mem::swap(&mut self.last_event_id, &mut self.id_buffer);
            self.id_dirty = false;
        }
    }

    // S-SSE-12.
    /// The blank-line step when the data buffer is empty (step 2): nothing fires.
    #[inline(always)]
    fn dispatch_nothing(&mut self) {
        self.commit_id();
        self.event_retry = None;
        self.event_type.clear();
    }

    // S-SSE-12.
    /// The blank-line step when the data buffer is not empty: the event.
    #[inline(always)]
    fn dispatch(&mut self) -> SseEvent {
        debug_assert!(self.has_data());
        self.commit_id();
        // Step 3: the buffer holds the values joined with LF, so no trailing LF to remove.
        let data = if self.data_lines == 1 {
            std::mem::take(&mut self.data_first)
        } else {
            self.data_buf.split().freeze()
        };
        self.data_lines = 0;
        self.data_len = 0;
        // Steps 4 and 5.
        let event = if self.event_type.is_empty() {
            None
        } else {
            let event = Box::from(self.event_type.as_str());
            self.event_type.clear();
            Some(event)
        };
        let id = if self.last_event_id.is_empty() {
            None
        } else {
            Some(Box::from(self.last_event_id.as_str()))
        };
        SseEvent {
            event,
            data,
            id,
            retry: self.event_retry.take(),
        }
    }
}

// S-SSE-7.
/// Where the value starts in `line` (at offset `start` of its chunk), given that the field
/// name and colon take `after_colon` bytes: after one optional space.
#[inline(always)]
fn value_start(line: &[u8], start: usize, after_colon: usize) -> usize {
    start + after_colon + usize::from(line.get(after_colon) == Some(&b' '))
}

// S-SSE-2.
/// Appends `value` to `out`, replacing invalid UTF-8 with U+FFFD.
#[inline]
fn push_lossy(out: &mut String, value: &[u8]) {
    match std::str::from_utf8(value) {
        Ok(text) => out.push_str(text),
        Err(_) => out.push_str(&String::from_utf8_lossy(value)),
    }
}

/// Appends to `buf`, growing it by at least [`BUF_GROWTH`] at a time: `buf` is split off and
/// frozen at every complete line, and this keeps the allocations that follow large enough to
/// amortize.
#[inline]
fn buf_extend(buf: &mut BytesMut, s: &[u8]) {
    if buf.capacity() - buf.len() < s.len() {
        buf.reserve(s.len().max(BUF_GROWTH));
    }
    buf.extend_from_slice(s);
}

/// Index of the first CR or LF in `hay`. Short lines (ids, small fields) and the small
/// slices of tiny chunks are searched word-at-a-time (two possibly overlapping words), which
/// avoids the call and setup of a vectorized search; longer ones go to `memchr2` after a
/// 16-byte head check.
#[inline(always)]
fn find_eol(hay: &[u8]) -> Option<usize> {
    if let Some((head, rest)) = hay.split_first_chunk::<16>() {
        let (a, b) = head.split_at(8);
        if let Some(i) = eol_in_word(a) {
            return Some(i);
        }
        if let Some(i) = eol_in_word(b) {
            return Some(8 + i);
        }
        return memchr2(b'\n', b'\r', rest).map(|i| i + 16);
    }
    let n = hay.len();
    // Two words covering the slice; the second may overlap the first, and a hit in the
    // overlap cannot come second (the first word would have had it).
    if n >= 8 {
        if let Some(i) = eol_in_word(&hay[..8]) {
            return Some(i);
        }
        eol_in_word(&hay[n - 8..]).map(|i| i + n - 8)
    } else if n >= 4 {
        if let Some(i) = eol_in_half(&hay[..4]) {
            return Some(i);
        }
        eol_in_half(&hay[n - 4..]).map(|i| i + n - 4)
    } else {
        hay.iter().position(|&b| b == b'\n' || b == b'\r')
    }
}

/// Index of the first CR or LF in an 8-byte slice, by the "has zero byte" bit trick. The
/// lowest flagged byte is exact (false positives can only appear above a true match).
#[inline(always)]
fn eol_in_word(word: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(word);
    let w = u64::from_le_bytes(bytes);
    let lf = w ^ (LO * u64::from(b'\n'));
    let cr = w ^ (LO * u64::from(b'\r'));
    let hits = ((lf.wrapping_sub(LO) & !lf) | (cr.wrapping_sub(LO) & !cr)) & HI;
    if hits == 0 {
        None
    } else {
        Some((hits.trailing_zeros() / 8) as usize)
    }
}

/// [`eol_in_word`] for a 4-byte slice.
#[inline(always)]
fn eol_in_half(word: &[u8]) -> Option<usize> {
    const LO: u32 = 0x0101_0101;
    const HI: u32 = 0x8080_8080;
    let mut bytes = [0u8; 4];
    bytes.copy_from_slice(word);
    let w = u32::from_le_bytes(bytes);
    let lf = w ^ (LO * u32::from(b'\n'));
    let cr = w ^ (LO * u32::from(b'\r'));
    let hits = ((lf.wrapping_sub(LO) & !lf) | (cr.wrapping_sub(LO) & !cr)) & HI;
    if hits == 0 {
        None
    } else {
        Some((hits.trailing_zeros() / 8) as usize)
    }
}

// S-SSE-11.
/// A valid `retry` value: a non-empty run of ASCII digits, base 10, in milliseconds. Anything else,
/// and values that overflow `u64`, are ignored (`None`).
fn parse_retry(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    let mut ms: u64 = 0;
    for &b in value {
        if !b.is_ascii_digit() {
            return None;
        }
        ms = ms.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(ms)
}

#[cfg(test)]
mod find_eol_tests {
    use super::find_eol;

    #[test]
    fn s_sse_3_find_eol_matches_naive_search() {
        let mut hay = [b'a'; 40];
        assert_eq!(find_eol(&hay), None);
        for len in 0..=40 {
            assert_eq!(find_eol(&hay[..len]), None);
        }
        for at in 0..40 {
            for eol in [b'\n', b'\r'] {
                hay[at] = eol;
                // A later second line end must not win.
                if at + 1 < 40 {
                    hay[at + 1] = b'\r';
                }
                for len in 0..=40 {
                    let want = hay[..len].iter().position(|&b| b == b'\n' || b == b'\r');
                    assert_eq!(find_eol(&hay[..len]), want, "at {at} len {len}");
                }
                hay = [b'a'; 40];
            }
        }
        // Every position pair in every short length, with near-miss filler bytes.
        for len in 0..=20usize {
            for a in 0..len {
                for b in a..len {
                    let mut h: Vec<u8> =
                        (0..len).map(|i| [0x8D, 0x0B, 0x8A, 0x00][i % 4]).collect();
                    h[a] = b'\r';
                    h[b] = b'\n';
                    assert_eq!(find_eol(&h), Some(a), "len {len} a {a} b {b}");
                    h[a] = 0x0E;
                    let want = h.iter().position(|&x| x == b'\n' || x == b'\r');
                    assert_eq!(find_eol(&h), want, "len {len} b {b}");
                }
            }
        }
        // Bytes near CR and LF in value (0x09, 0x0B, 0x0C, 0x0E, 0x8A, 0x8D) are not line ends.
        let tricky = [0x09, 0x0B, 0x0C, 0x0E, 0x8A, 0x8D, 0x00, 0xFF, 0x0A];
        assert_eq!(find_eol(&tricky), Some(8));
        let mut word = [0x8Du8; 24];
        word[..9].copy_from_slice(&tricky);
        assert_eq!(find_eol(&word), Some(8));
        word[8] = 0x8A;
        assert_eq!(find_eol(&word), None);
        word[15] = b'\r';
        assert_eq!(find_eol(&word), Some(15));
        let mut long = vec![0x8Du8; 20];
        long.extend_from_slice(&[0x0B, 0x0D]);
        assert_eq!(find_eol(&long), Some(21));
    }
}
