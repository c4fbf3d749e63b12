//! Fuzz body of the `sse_decode` target, and a naive reference decoder it checks against.
//!
//! Input layout: the first four bytes are control bytes, the rest is the event stream.
//!
//! | byte | meaning |
//! |---|---|
//! | 0 | `max_line_bytes`, see [`pick_limit`] (small values are common) |
//! | 1 | `max_event_bytes`, likewise |
//! | 2 | largest chunk size minus one, for the random chunking |
//! | 3 | seed of the chunking and of the per-chunk choices |
//!
//! The oracle ([`sse_decode`]) decodes the stream whole, in random chunks (mixing
//! [`SseDecoder::feed`] and [`SseDecoder::feed_bytes`], draining after some chunks and not
//! others), and, for inputs up to 4 KiB, byte by byte. It panics unless every run gives
//! exactly the events, error, last event ID and retry of [`reference_decode`], a
//! deliberately simple whole-input implementation of the same rules, and unless the
//! decoder's [`buffered_len`](SseDecoder::buffered_len) stays within the limits whenever it
//! asks for more input.

use std::time::Duration;

use bytes::Bytes;

use super::rng::XorShift64Star;
use crate::sse::{SseDecoder, SseError, SseEvent, SseLimits};

/// Everything observable after decoding a whole stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DecodeRun {
    /// Dispatched events in order, ending with the error if one occurred.
    pub items: Vec<Result<SseEvent, SseError>>,
    /// `last_event_id()` at the end; `""` after an error (state after an error is not
    /// compared).
    pub last_event_id: String,
    /// `retry()` at the end; `None` after an error.
    pub retry: Option<Duration>,
}

impl DecodeRun {
    fn failed(&self) -> bool {
        matches!(self.items.last(), Some(Err(_)))
    }

    fn seal(mut self, last_event_id: &str, retry: Option<Duration>) -> Self {
        if !self.failed() {
            self.last_event_id = last_event_id.to_owned();
            self.retry = retry;
        }
        self
    }
}

/// Maps a control byte to a limit: `0..=63` as is, `64..=127` in steps of 16 from 64,
/// `128..=191` in steps of 1 KiB from 1 KiB, `192..=255` the 16 MiB default.
pub fn pick_limit(b: u8) -> usize {
    match b {
        0..=63 => usize::from(b),
        64..=127 => 64 + usize::from(b - 64) * 16,
        128..=191 => 1024 * (usize::from(b - 127)),
        192..=255 => SseLimits::DEFAULT_BYTES,
    }
}

/// The `sse_decode` fuzz target. See the module docs for the input layout and the oracle.
pub fn sse_decode(data: &[u8]) {
    let Some((ctl, input)) = data.split_first_chunk::<4>() else {
        return;
    };
    let limits = SseLimits {
        max_line_bytes: pick_limit(ctl[0]),
        max_event_bytes: pick_limit(ctl[1]),
    };
    let expected = reference_decode(input, limits);

    let whole = decode_chunks(limits, input, &mut |_| usize::MAX, 0);
    assert_eq!(whole, expected, "whole input differs from the reference");

    let max_chunk = usize::from(ctl[2]) + 1;
    let mut rng = XorShift64Star::from_seed(u64::from(ctl[3]) ^ ((input.len() as u64) << 8));
    let split = decode_chunks(
        limits,
        input,
        &mut |r| 1 + (r % max_chunk as u64) as usize,
        u64::from(ctl[3]),
    );
    assert_eq!(split, expected, "chunked input differs from the reference");

    // A second chunking, from the other end of the size range.
    let tiny = decode_chunks(
        limits,
        input,
        &mut |r| 1 + (r % 3) as usize,
        rng.next_u64().wrapping_add(1),
    );
    assert_eq!(tiny, expected, "tiny chunks differ from the reference");

    if input.len() <= 4096 {
        let bytes = decode_chunks(limits, input, &mut |_| 1, rng.next_u64());
        assert_eq!(
            bytes, expected,
            "byte-by-byte input differs from the reference"
        );
    }
}

/// Decodes `input` in chunks whose sizes `size(random)` picks; `seed` drives the sizes and
/// the choice between `feed` / `feed_bytes` and draining or not after each chunk.
fn decode_chunks(
    limits: SseLimits,
    input: &[u8],
    size: &mut dyn FnMut(u64) -> usize,
    seed: u64,
) -> DecodeRun {
    let mut rng = XorShift64Star::from_seed(seed);
    // Half the runs send every owned chunk through the in-place path, however small.
    let small = if seed & 1 == 0 { 0 } else { 32 };
    let mut dec = SseDecoder::with_limits(limits).with_small_chunk(small);
    let mut out = DecodeRun::default();
    let mut ok = true;
    let mut rest = input;
    while !rest.is_empty() {
        let r = rng.next_u64();
        let n = size(r).clamp(1, rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        if r & (1 << 40) != 0 {
            dec.feed_bytes(Bytes::copy_from_slice(chunk));
        } else {
            dec.feed(chunk);
        }
        if ok && (r & (3 << 41) != 0 || seed == 0) {
            ok = drain(&mut dec, &mut out.items);
        }
    }
    dec.finish();
    if ok && drain(&mut dec, &mut out.items) {
        assert!(dec.is_finished(), "not finished after finish() and drain");
        assert_eq!(dec.next_event(), Ok(None));
        assert_eq!(
            dec.buffered_len(),
            0,
            "buffers left after the end of stream"
        );
    }
    let (id, retry) = (dec.last_event_id().to_owned(), dec.retry());
    out.seal(&id, retry)
}

/// Pulls events until `Ok(None)` or an error; returns false after an error.
fn drain(dec: &mut SseDecoder, items: &mut Vec<Result<SseEvent, SseError>>) -> bool {
    loop {
        match dec.next_event() {
            Ok(Some(ev)) => items.push(Ok(ev)),
            Ok(None) => {
                let l = dec.limits();
                // One line of input, the event's data, and the event type (a line, up to
                // 3x larger after U+FFFD replacement).
                let bound = l
                    .max_event_bytes
                    .saturating_add(l.max_line_bytes.saturating_mul(4));
                assert!(
                    dec.buffered_len() <= bound,
                    "decoder holds {} bytes, bound {bound}",
                    dec.buffered_len()
                );
                return true;
            }
            Err(e) => {
                assert_eq!(dec.next_event(), Err(e.clone()), "error not sticky");
                assert_eq!(dec.buffered_len(), 0, "buffers kept after an error");
                items.push(Err(e));
                return false;
            }
        }
    }
}

// S-SSE-2 … S-SSE-14.
/// The WHATWG rules applied to a whole input in the most direct way:
/// strip a BOM, cut lines, interpret each. Same limits semantics as [`SseDecoder`].
pub fn reference_decode(input: &[u8], limits: SseLimits) -> DecodeRun {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let input = if let Some(rest) = input.strip_prefix(BOM) {
        rest
    } else if input.len() < BOM.len() && BOM.starts_with(input) {
        // A partial BOM at the end of the stream: an incomplete line, discarded.
        &[]
    } else {
        input
    };

    let mut out = DecodeRun::default();
    let mut data: Vec<u8> = Vec::new();
    let mut has_data = false;
    let mut event_type = String::new();
    let mut id_buffer = String::new();
    let mut last_event_id = String::new();
    let mut retry = None;
    let mut event_retry = None;

    let mut i = 0;
    let mut start = 0;
    while i <= input.len() {
        let end_of_line = match input.get(i) {
            Some(b'\r' | b'\n') => true,
            Some(_) => false,
            None => {
                // Incomplete last line: discarded, but it must respect the limit too.
                if i - start > limits.max_line_bytes {
                    out.items.push(Err(SseError::LineTooLong {
                        limit: limits.max_line_bytes,
                    }));
                }
                break;
            }
        };
        if !end_of_line {
            i += 1;
            continue;
        }
        let line = &input[start..i];
        i += if input[i] == b'\r' && input.get(i + 1) == Some(&b'\n') {
            2
        } else {
            1
        };
        start = i;
        if line.len() > limits.max_line_bytes {
            out.items.push(Err(SseError::LineTooLong {
                limit: limits.max_line_bytes,
            }));
            return out;
        }

        if line.is_empty() {
            last_event_id = id_buffer.clone();
            let r = event_retry.take();
            if has_data {
                out.items.push(Ok(SseEvent {
                    event: (!event_type.is_empty()).then(|| event_type.as_str().into()),
                    data: Bytes::from(std::mem::take(&mut data)),
                    id: (!last_event_id.is_empty()).then(|| last_event_id.as_str().into()),
                    retry: r,
                }));
            }
            data.clear();
            has_data = false;
            event_type.clear();
            continue;
        }
        if line[0] == b':' {
            continue;
        }
        let (name, mut value) = match line.iter().position(|&b| b == b':') {
            Some(c) => (&line[..c], &line[c + 1..]),
            None => (line, &b""[..]),
        };
        if value.first() == Some(&b' ') {
            value = &value[1..];
        }
        match name {
            b"data" => {
                if has_data {
                    data.push(b'\n');
                }
                data.extend_from_slice(value);
                has_data = true;
                if data.len() > limits.max_event_bytes {
                    out.items.push(Err(SseError::EventTooLarge {
                        limit: limits.max_event_bytes,
                    }));
                    return out;
                }
            }
            b"event" => event_type = String::from_utf8_lossy(value).into_owned(),
            b"id" if !value.contains(&0) => {
                id_buffer = String::from_utf8_lossy(value).into_owned();
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // Digits only, so valid UTF-8; `parse` fails only on overflow.
                if let Ok(ms) = String::from_utf8_lossy(value).parse::<u64>() {
                    retry = Some(Duration::from_millis(ms));
                    event_retry = retry;
                }
            }
            _ => {}
        }
    }
    out.seal(&last_event_id, retry)
}
