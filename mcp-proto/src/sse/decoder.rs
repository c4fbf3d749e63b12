//! The incremental `text/event-stream` decoder.
//!
//! # Theory of operation
//!
//! The decoder is the WHATWG event-stream parser (S-SSE-2 … S-SSE-14) turned into a sans-IO
//! pull machine. Input is pushed with [`SseDecoder::feed`] / [`SseDecoder::feed_bytes`] and
//! only *stored*; parsing happens lazily in [`SseDecoder::next_event`], which runs until it
//! can hand out one event or runs out of complete lines. Nothing is parsed ahead of what the
//! caller asks for, so the decoder holds no queue of finished events, and an error surfaces
//! exactly after the last good event before it.
//!
//! ## Input
//!
//! Not-yet-parsed input lives in three places, in stream order:
//!
//! 1. `buf`, a [`BytesMut`] of *copied* bytes: what [`feed`](SseDecoder::feed) copied in, and
//!    the incomplete last line of earlier chunks. `scanned` records how much of `buf` is
//!    known to hold no CR or LF, so bytes arriving one at a time are never rescanned.
//! 2. `cur`, the [`Bytes`] chunk being parsed, and
//! 3. `queue`, owned chunks [`feed_bytes`](SseDecoder::feed_bytes) received while `cur` was
//!    still busy.
//!
//! A line that lies entirely inside one owned chunk is parsed in place; a single-line
//! event's data is then handed out as a [`Bytes::slice`] of that chunk: no copy. A line
//! that crosses a chunk boundary is assembled in `buf` (one copy of its bytes); once `buf`
//! holds a line end, `buf` is split off and frozen into a [`Bytes`] and parsed exactly like
//! an owned chunk, so there is one line parser, and data lines from `buf` are zero-copy too.
//!
//! Two pieces of input state ride along: the byte-order-mark matcher (up to three bytes,
//! only at stream start, S-SSE-2), and `skip_lf`, set when a CR ended the available input so
//! that an LF arriving next completes that CRLF instead of making an empty line (S-SSE-3).
//!
//! ## States
//!
//! | state | input | action | next state |
//! |---|---|---|---|
//! | `Bom` (stream start) | bytes matching `EF BB BF` so far | hold them | `Bom` |
//! | `Bom` | all three BOM bytes | drop them (S-SSE-2) | `Lines` |
//! | `Bom` | a byte breaking the match | release the held bytes as content | `Lines` |
//! | `Lines` | empty line | dispatch (S-SSE-5, S-SSE-12) | `Lines` |
//! | `Lines` | `:` line | ignore (S-SSE-6) | `Lines` |
//! | `Lines` | field line | apply `data`/`event`/`id`/`retry`, ignore others (S-SSE-7 … S-SSE-11) | `Lines` |
//! | `Lines` | CR as the last available byte | end the line | `AfterCr` |
//! | `AfterCr` | LF | swallow it (S-SSE-3) | `Lines` |
//! | `AfterCr` | any other byte | parse it normally | `Lines` |
//! | any | line over the limit, data over the limit | report [`SseError`], drop buffers | `Failed` |
//! | any but `Failed` | [`finish`](SseDecoder::finish), then input drained | discard the incomplete line and event (S-SSE-13) | `Finished` |
//! | `Failed` / `Finished` | anything | input ignored; `Failed` repeats its error | unchanged |
//!
//! ## Event state
//!
//! Per S-SSE-4: the data buffer (`data_first` for the first line, kept as a zero-copy slice,
//! plus `data_buf` once a second line forces a copy), the event type buffer, and the last
//! event ID *buffer* (`id_buffer`), which is copied into the last event ID *string*
//! (`last_event_id`) at every blank line, whether or not an event is dispatched (S-SSE-12
//! step 1). The data buffer stores values joined with LF, i.e. without the trailing LF that
//! step 3 would strip, so its length is exactly the dispatched data's length.
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

    // ---- input, in stream order: buf, cur, queue ----
    /// Copied, not yet parsed bytes. Empty whenever `cur` is being parsed.
    buf: BytesMut,
    /// `buf[..scanned]` contains no CR and no LF.
    scanned: usize,
    /// The owned chunk being parsed.
    cur: Bytes,
    /// Owned chunks waiting behind `cur`.
    queue: VecDeque<Bytes>,
    /// How many bytes of a leading BOM were matched (and held back) so far.
    bom_matched: u8,
    /// The stream-start BOM question is settled.
    bom_done: bool,
    /// A CR ended the input seen so far: an LF coming next is part of that line end.
    skip_lf: bool,
    /// [`finish`](Self::finish) was called.
    finished: bool,
    /// Sticky error.
    error: Option<SseError>,

    // ---- the event being assembled (S-SSE-4) ----
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
    /// Last event ID buffer.
    id_buffer: String,
    /// `id_buffer` changed since the last blank line.
    id_dirty: bool,
    /// A valid `retry` seen since the last blank line.
    event_retry: Option<Duration>,

    // ---- stream-wide results ----
    /// The last event ID string, set from `id_buffer` at each blank line.
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
            buf: BytesMut::new(),
            scanned: 0,
            cur: Bytes::new(),
            queue: VecDeque::new(),
            bom_matched: 0,
            bom_done: false,
            skip_lf: false,
            finished: false,
            error: None,
            data_first: Bytes::new(),
            data_buf: BytesMut::new(),
            data_lines: 0,
            data_len: 0,
            event_type: String::new(),
            id_buffer: String::new(),
            id_dirty: false,
            event_retry: None,
            last_event_id: String::new(),
            retry: None,
        }
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
    pub fn feed(&mut self, chunk: &[u8]) {
        if chunk.is_empty() || self.finished || self.error.is_some() {
            return;
        }
        let mut chunk = chunk;
        if !self.bom_done {
            let skip = self.match_bom(chunk);
            if !self.bom_done {
                return;
            }
            chunk = &chunk[skip..];
        }
        self.push_slice(chunk);
    }

    /// Stores an owned chunk of the body without copying it: complete lines inside the chunk
    /// are parsed in place, and a single-line event's data is a slice of `chunk`. Only a line
    /// that continues into the next chunk is copied.
    ///
    /// Ignored after [`finish`](Self::finish) or an error. Empty chunks are no-ops.
    pub fn feed_bytes(&mut self, mut chunk: Bytes) {
        if chunk.is_empty() || self.finished || self.error.is_some() {
            return;
        }
        if !self.bom_done {
            let skip = self.match_bom(&chunk);
            if !self.bom_done {
                return;
            }
            chunk.advance(skip);
            if chunk.is_empty() {
                return;
            }
        }
        if self.cur.is_empty() && self.queue.is_empty() {
            self.cur = chunk;
        } else {
            self.queue.push_back(chunk);
        }
    }

    /// Marks the end of the body. Complete events already fed are still returned by
    /// [`next_event`](Self::next_event); an incomplete last line and an event without its
    /// closing blank line are discarded (S-SSE-13). Idempotent.
    pub fn finish(&mut self) {
        if !self.bom_done {
            // A partial BOM at the very end is an incomplete line: discarded.
            self.bom_done = true;
            self.bom_matched = 0;
        }
        self.finished = true;
    }

    // ------------------------------------------------------------------------------------
    // Output
    // ------------------------------------------------------------------------------------

    /// Parses up to the next dispatched event.
    ///
    /// - `Ok(Some(event))`: an event (S-SSE-12); call again, more may be buffered.
    /// - `Ok(None)`: every complete line has been parsed; feed more input. After
    ///   [`finish`](Self::finish), `Ok(None)` means the stream is over.
    /// - `Err(e)`: a limit was exceeded. Sticky: every later call returns the same error.
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

    /// The last event ID string (S-SSE-12 step 1): the last event ID buffer as of the most
    /// recent blank line, whether or not that blank line dispatched an event. `""` until an
    /// `id` field and a blank line were seen, and after an empty `id:` (S-SSE-10). This is
    /// the value to send as `Last-Event-ID` when non-empty (S-SSE-15).
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// The reconnection time of the last valid `retry` field seen (S-SSE-11), applied as soon
    /// as its line is parsed. `None` if there was none.
    pub fn retry(&self) -> Option<Duration> {
        self.retry
    }

    /// Whether the stream is over: [`finish`](Self::finish) was called and
    /// [`next_event`](Self::next_event) has consumed all input (it returned `Ok(None)`), or
    /// the decoder failed with an error.
    pub fn is_finished(&self) -> bool {
        self.error.is_some()
            || (self.finished
                && self.buf.is_empty()
                && self.cur.is_empty()
                && self.queue.is_empty())
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
        self.buf.len()
            + self.cur.len()
            + self.queue.iter().map(Bytes::len).sum::<usize>()
            + self.data_first.len()
            + self.data_buf.len()
            + self.event_type.len()
    }

    // ------------------------------------------------------------------------------------
    // Input plumbing
    // ------------------------------------------------------------------------------------

    /// Runs the stream-start BOM matcher (S-SSE-2) over the start of `chunk`. Returns how
    /// many bytes of `chunk` belong to a complete BOM (to be dropped). While the question is
    /// open (`!self.bom_done`), the matched bytes are held back; when a byte breaks the match,
    /// the bytes held from *earlier* chunks are released as content before `chunk`, which is
    /// then content from its first byte.
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
    fn push_slice(&mut self, s: &[u8]) {
        if s.is_empty() {
            return;
        }
        if self.cur.is_empty() && self.queue.is_empty() {
            self.buf_extend(s);
        } else {
            self.queue.push_back(Bytes::copy_from_slice(s));
        }
    }

    /// Appends to `buf`, growing it by at least [`BUF_GROWTH`] at a time: `buf` is split off
    /// and frozen at every complete line, and this keeps the allocations that follow large
    /// enough to amortize.
    #[inline]
    fn buf_extend(&mut self, s: &[u8]) {
        if self.buf.capacity() - self.buf.len() < s.len() {
            self.buf.reserve(s.len().max(BUF_GROWTH));
        }
        self.buf.extend_from_slice(s);
    }

    /// Drops all buffers and records the sticky error.
    fn fail(&mut self, err: SseError) {
        self.error = Some(err);
        self.buf = BytesMut::new();
        self.scanned = 0;
        self.cur = Bytes::new();
        self.queue = VecDeque::new();
        self.reset_event();
        self.data_buf = BytesMut::new();
        self.event_type = String::new();
        self.id_buffer = String::new();
    }

    /// Forgets the event being assembled (not the id buffer, which outlives events).
    fn reset_event(&mut self) {
        self.data_first = Bytes::new();
        self.data_buf.clear();
        self.data_lines = 0;
        self.data_len = 0;
        self.event_type.clear();
        self.event_retry = None;
    }

    /// Out of complete lines. At end of stream, discards the incomplete line and the
    /// undispatched event (S-SSE-13).
    fn need_more(&mut self) -> Option<SseEvent> {
        if self.finished {
            self.buf.clear();
            self.scanned = 0;
            self.skip_lf = false;
            self.reset_event();
            // The id buffer of an undispatched event never reached the last event ID string.
            if self.id_dirty {
                self.id_buffer.clone_from(&self.last_event_id);
                self.id_dirty = false;
            }
        }
        None
    }

    // ------------------------------------------------------------------------------------
    // Parsing
    // ------------------------------------------------------------------------------------

    /// The body of [`next_event`](Self::next_event), without the sticky-error wrapper.
    fn advance(&mut self) -> Result<Option<SseEvent>, SseError> {
        let max_line = self.limits.max_line_bytes;
        loop {
            if !self.buf.is_empty() {
                if self.skip_lf {
                    // `buf` only fills after the CR was consumed, so this is the next byte.
                    self.skip_lf = false;
                    if self.buf[0] == b'\n' {
                        debug_assert_eq!(self.scanned, 0);
                        self.buf.advance(1);
                        continue;
                    }
                }
                if let Some(i) = memchr2(b'\n', b'\r', &self.buf[self.scanned..]) {
                    // `buf` holds at least one complete line: parse it like an owned chunk.
                    let first_end = self.scanned + i;
                    let chunk = self.buf.split().freeze();
                    self.scanned = 0;
                    let behind = std::mem::replace(&mut self.cur, chunk);
                    if !behind.is_empty() {
                        self.queue.push_front(behind);
                    }
                    if let Some(event) = self.parse_cur(first_end)? {
                        return Ok(Some(event));
                    }
                    continue;
                }
                // `buf` is one incomplete line; extend it from the owned chunks.
                self.scanned = self.buf.len();
                if self.scanned > max_line {
                    return Err(SseError::LineTooLong { limit: max_line });
                }
                if self.cur.is_empty() {
                    match self.queue.pop_front() {
                        Some(chunk) => self.cur = chunk,
                        None => return Ok(self.need_more()),
                    }
                }
                match memchr2(b'\n', b'\r', &self.cur) {
                    Some(j) => {
                        if self.buf.len() + j > max_line {
                            return Err(SseError::LineTooLong { limit: max_line });
                        }
                        // Take the line end along, both bytes of a CRLF if present.
                        let take = if self.cur[j] == b'\r' && self.cur.get(j + 1) == Some(&b'\n') {
                            j + 2
                        } else {
                            j + 1
                        };
                        let cur = std::mem::take(&mut self.cur);
                        self.buf_extend(&cur[..take]);
                        self.cur = cur;
                        self.cur.advance(take);
                        // The line end is at `scanned + j`: nothing before it needs a rescan.
                        self.scanned += j;
                    }
                    None => {
                        if self.buf.len() + self.cur.len() > max_line {
                            return Err(SseError::LineTooLong { limit: max_line });
                        }
                        let cur = std::mem::take(&mut self.cur);
                        self.buf_extend(&cur);
                        self.scanned = self.buf.len();
                    }
                }
                continue;
            }

            if self.cur.is_empty() {
                match self.queue.pop_front() {
                    Some(chunk) => self.cur = chunk,
                    None => return Ok(self.need_more()),
                }
            }
            if let Some(event) = self.parse_cur(0)? {
                return Ok(Some(event));
            }
        }
    }

    /// Parses complete lines of `cur` (with `buf` empty) until an event is dispatched or the
    /// chunk is used up; an incomplete last line moves into `buf`. `hint`: the first line
    /// holds no line end before this offset.
    fn parse_cur(&mut self, hint: usize) -> Result<Option<SseEvent>, SseError> {
        debug_assert!(self.buf.is_empty());
        let mut chunk = std::mem::take(&mut self.cur);
        let (consumed, event) = self.parse_chunk(&chunk, hint)?;
        if consumed < chunk.len() {
            chunk.advance(consumed);
            self.cur = chunk;
        }
        Ok(event)
    }

    /// The line loop over one contiguous owned chunk. Returns how many bytes were consumed
    /// and the event, if one was dispatched (then parsing stops right after its blank line).
    fn parse_chunk(
        &mut self,
        chunk: &Bytes,
        hint: usize,
    ) -> Result<(usize, Option<SseEvent>), SseError> {
        let s: &[u8] = chunk;
        let max_line = self.limits.max_line_bytes;
        let mut pos = 0;
        if self.skip_lf && !s.is_empty() {
            self.skip_lf = false;
            if s[0] == b'\n' {
                pos = 1;
            }
        }
        let mut scan_from = hint.max(pos);
        while pos < s.len() {
            // Find the line end; empty lines (the event ends) are common enough for a
            // shortcut before calling into memchr.
            let end = match s.get(scan_from) {
                Some(b'\n' | b'\r') => scan_from,
                _ => match memchr2(b'\n', b'\r', &s[scan_from..]) {
                    Some(i) => scan_from + i,
                    None => {
                        // Incomplete last line: keep it for the next chunk.
                        let tail = &s[pos..];
                        if tail.len() > max_line {
                            return Err(SseError::LineTooLong { limit: max_line });
                        }
                        self.buf_extend(tail);
                        self.scanned = self.buf.len();
                        return Ok((s.len(), None));
                    }
                },
            };
            if end - pos > max_line {
                return Err(SseError::LineTooLong { limit: max_line });
            }
            // S-SSE-3: CRLF, LF, or CR; a CR ending the chunk may still be followed by LF.
            let mut next = end + 1;
            if s[end] == b'\r' {
                match s.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            let event = self.process_line(chunk, pos, end)?;
            pos = next;
            scan_from = next;
            if event.is_some() {
                return Ok((pos, event));
            }
        }
        Ok((s.len(), None))
    }

    /// Interprets one line, `chunk[start..end]` (S-SSE-5 … S-SSE-11).
    #[inline]
    fn process_line(
        &mut self,
        chunk: &Bytes,
        start: usize,
        end: usize,
    ) -> Result<Option<SseEvent>, SseError> {
        let line = &chunk[start..end];
        let Some(&first) = line.first() else {
            // S-SSE-5: an empty line dispatches.
            return Ok(self.dispatch());
        };
        if first == b':' {
            // S-SSE-6: comment.
            return Ok(None);
        }
        if line.starts_with(b"data:") {
            // Fast path for the most common field.
            let value_start = start + 5 + usize::from(line.get(5) == Some(&b' '));
            self.push_data(chunk, value_start, end)?;
            return Ok(None);
        }
        // S-SSE-7 / S-SSE-8: field name up to the first colon, else the whole line.
        let (name, value_start) = match memchr(b':', line) {
            Some(colon) => {
                let skip = usize::from(line.get(colon + 1) == Some(&b' '));
                (&line[..colon], start + colon + 1 + skip)
            }
            None => (line, end),
        };
        let value = &chunk[value_start..end];
        // S-SSE-9 / S-SSE-10 / S-SSE-11: case-sensitive names; unknown ones are ignored.
        match name {
            b"data" => self.push_data(chunk, value_start, end)?,
            b"event" => {
                self.event_type.clear();
                self.event_type.push_str(&String::from_utf8_lossy(value));
            }
            b"id" if memchr(0, value).is_none() => {
                self.id_buffer.clear();
                self.id_buffer.push_str(&String::from_utf8_lossy(value));
                self.id_dirty = true;
            }
            b"retry" => {
                if let Some(ms) = parse_retry(value) {
                    let retry = Duration::from_millis(ms);
                    self.retry = Some(retry);
                    self.event_retry = Some(retry);
                }
            }
            _ => {}
        }
        Ok(None)
    }

    /// Appends the value `chunk[start..end]` to the data buffer (S-SSE-9), keeping the first
    /// line as a zero-copy slice.
    #[inline]
    fn push_data(&mut self, chunk: &Bytes, start: usize, end: usize) -> Result<(), SseError> {
        let limit = self.limits.max_event_bytes;
        let add = end - start;
        match self.data_lines {
            0 => {
                if add > limit {
                    return Err(SseError::EventTooLarge { limit });
                }
                if add > 0 {
                    self.data_first = chunk.slice(start..end);
                }
                self.data_len = add;
            }
            n => {
                let new_len = self.data_len + 1 + add;
                if new_len > limit {
                    return Err(SseError::EventTooLarge { limit });
                }
                if n == 1 {
                    // Second line: now the data must be copied together.
                    self.data_buf.reserve(new_len);
                    self.data_buf.extend_from_slice(&self.data_first);
                    self.data_first = Bytes::new();
                }
                self.data_buf.put_u8(b'\n');
                self.data_buf.extend_from_slice(&chunk[start..end]);
                self.data_len = new_len;
            }
        }
        self.data_lines = self.data_lines.saturating_add(1);
        Ok(())
    }

    /// The blank-line step (S-SSE-12).
    fn dispatch(&mut self) -> Option<SseEvent> {
        // Step 1: the last event ID string takes the buffer's value, dispatch or not.
        if self.id_dirty {
            self.last_event_id.clone_from(&self.id_buffer);
            self.id_dirty = false;
        }
        let retry = self.event_retry.take();
        // Step 2: an empty data buffer fires nothing.
        if self.data_lines == 0 {
            self.event_type.clear();
            return None;
        }
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
        Some(SseEvent {
            event,
            data,
            id,
            retry,
        })
    }
}

/// S-SSE-11: a non-empty run of ASCII digits, base 10, in milliseconds. Anything else, and
/// values that overflow `u64`, are ignored (`None`).
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
