//! Unit tests of the SSE codec. Test names cite the S-SSE requirement they check.
//!
//! Every decoder vector goes through [`check`], which decodes it whole, byte by byte, and
//! split in two at every offset, each with `feed` and `feed_bytes`, draining after every
//! chunk and only at the end, and asserts that all of those give the same events, the same
//! error, and the same final last event ID and retry.

use std::time::Duration;

use bytes::Bytes;

use super::*;

// ----------------------------------------------------------------------------------------
// Harness
// ----------------------------------------------------------------------------------------

/// Everything observable after decoding a whole stream.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    /// Events in order, ending with the error if there was one.
    items: Vec<Result<SseEvent, SseError>>,
    /// `last_event_id()` after the stream (not compared after an error).
    last_event_id: String,
    /// `retry()` after the stream (not compared after an error).
    retry: Option<Duration>,
}

impl Outcome {
    fn events(&self) -> Vec<SseEvent> {
        self.items
            .iter()
            .map(|r| r.clone().expect("unexpected error"))
            .collect()
    }

    fn error(&self) -> Option<SseError> {
        self.items.last().and_then(|r| r.clone().err())
    }

    fn data(&self) -> Vec<Vec<u8>> {
        self.events().into_iter().map(|e| e.data.to_vec()).collect()
    }
}

#[derive(Debug, Clone, Copy)]
struct Mode {
    /// `feed_bytes` rather than `feed`.
    owned: bool,
    /// Owned chunks up to this size are copied (default 32; 0 forces the in-place path).
    small_chunk: usize,
    drain_each: bool,
}

const MODES: [Mode; 6] = [
    Mode {
        owned: false,
        small_chunk: 32,
        drain_each: true,
    },
    Mode {
        owned: true,
        small_chunk: 0,
        drain_each: true,
    },
    Mode {
        owned: true,
        small_chunk: 32,
        drain_each: true,
    },
    Mode {
        owned: false,
        small_chunk: 32,
        drain_each: false,
    },
    Mode {
        owned: true,
        small_chunk: 0,
        drain_each: false,
    },
    Mode {
        owned: true,
        small_chunk: 32,
        drain_each: false,
    },
];

/// Drains `dec` into `items`; returns false once an error was seen.
fn drain(dec: &mut SseDecoder, items: &mut Vec<Result<SseEvent, SseError>>) -> bool {
    loop {
        match dec.next_event() {
            Ok(Some(ev)) => items.push(Ok(ev)),
            Ok(None) => {
                let l = dec.limits();
                let bound = l
                    .max_event_bytes
                    .saturating_add(l.max_line_bytes.saturating_mul(4));
                assert!(
                    dec.buffered_len() <= bound,
                    "buffered {} > bound {bound}",
                    dec.buffered_len()
                );
                return true;
            }
            Err(e) => {
                // Sticky.
                assert_eq!(dec.next_event(), Err(e.clone()));
                assert!(dec.is_finished());
                assert_eq!(dec.buffered_len(), 0);
                items.push(Err(e));
                return false;
            }
        }
    }
}

fn run(limits: SseLimits, chunks: &[&[u8]], mode: Mode) -> Outcome {
    let mut dec = SseDecoder::with_limits(limits).with_small_chunk(mode.small_chunk);
    let mut items = Vec::new();
    let mut ok = true;
    for chunk in chunks {
        if mode.owned {
            dec.feed_bytes(Bytes::copy_from_slice(chunk));
        } else {
            dec.feed(chunk);
        }
        if mode.drain_each && ok {
            ok = drain(&mut dec, &mut items);
        }
    }
    dec.finish();
    if ok && drain(&mut dec, &mut items) {
        assert!(dec.is_finished());
        assert_eq!(dec.next_event(), Ok(None));
        assert_eq!(dec.buffered_len(), 0);
    }
    let failed = !ok || matches!(items.last(), Some(Err(_)));
    Outcome {
        items,
        last_event_id: if failed {
            String::new()
        } else {
            dec.last_event_id().to_owned()
        },
        retry: if failed { None } else { dec.retry() },
    }
}

/// Decodes `input` whole, byte by byte and split at every offset, in every [`Mode`], and
/// asserts identical outcomes.
fn check_with(input: &[u8], limits: SseLimits) -> Outcome {
    let expected = run(limits, &[input], MODES[0]);
    for mode in MODES {
        assert_eq!(run(limits, &[input], mode), expected, "whole, {mode:?}");
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(
            run(limits, &bytes, mode),
            expected,
            "byte by byte, {mode:?}"
        );
        for k in 0..=input.len() {
            let (a, b) = input.split_at(k);
            assert_eq!(
                run(limits, &[a, b], mode),
                expected,
                "split at {k}, {mode:?}"
            );
        }
    }
    expected
}

fn check(input: &[u8]) -> Outcome {
    check_with(input, SseLimits::default())
}

/// For large inputs: whole, byte by byte, 7-byte chunks and a few splits.
fn check_large(input: &[u8], limits: SseLimits) -> Outcome {
    let expected = run(limits, &[input], MODES[1]);
    for mode in MODES {
        assert_eq!(run(limits, &[input], mode), expected, "whole, {mode:?}");
        let sevens: Vec<&[u8]> = input.chunks(7).collect();
        assert_eq!(
            run(limits, &sevens, mode),
            expected,
            "7-byte chunks, {mode:?}"
        );
        for k in [1, 2, 3, 7, input.len() / 2, input.len().saturating_sub(2)] {
            let (a, b) = input.split_at(k.min(input.len()));
            assert_eq!(
                run(limits, &[a, b], mode),
                expected,
                "split at {k}, {mode:?}"
            );
        }
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(run(limits, &bytes, MODES[0]), expected, "byte by byte");
    expected
}

fn ev(data: &str) -> SseEvent {
    SseEvent {
        data: Bytes::copy_from_slice(data.as_bytes()),
        ..SseEvent::default()
    }
}

fn limits(line: usize, event: usize) -> SseLimits {
    SseLimits {
        max_line_bytes: line,
        max_event_bytes: event,
    }
}

// ----------------------------------------------------------------------------------------
// S-SSE-2: byte-order mark
// ----------------------------------------------------------------------------------------

#[test]
fn s_sse_2_leading_bom_is_stripped() {
    let out = check(b"\xEF\xBB\xBFdata: a\n\n");
    assert_eq!(out.events(), vec![ev("a")]);
}

#[test]
fn s_sse_2_bom_before_field_name_is_stripped_so_field_is_known() {
    // Without stripping, the field name would be "\u{feff}event" and be ignored.
    let out = check(b"\xEF\xBB\xBFevent: x\ndata: a\n\n");
    assert_eq!(out.events()[0].event.as_deref(), Some("x"));
}

#[test]
fn s_sse_2_only_one_bom_is_stripped() {
    // The second BOM is part of the first field name: an unknown field, ignored.
    let out = check(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n");
    assert_eq!(out.events(), vec![ev("b")]);
}

#[test]
fn s_sse_2_bom_later_in_stream_is_not_stripped() {
    let out = check(b"data: a\n\n\xEF\xBB\xBFdata: b\n\ndata: c\n\n");
    assert_eq!(out.events(), vec![ev("a"), ev("c")]);
}

#[test]
fn s_sse_2_partial_bom_is_content() {
    // "\xEF\xBB" + "data" is an unknown field name.
    let out = check(b"\xEF\xBBdata: a\n\ndata: b\n\n");
    assert_eq!(out.events(), vec![ev("b")]);
    let out = check(b"\xEFdata: a\n\n");
    assert_eq!(out.events(), vec![]);
    // A partial BOM followed by a line end is a (non-empty, unknown-field) line.
    let out = check(b"\xEF\xBB\ndata: a\n\n");
    assert_eq!(out.events(), vec![ev("a")]);
}

#[test]
fn s_sse_2_bom_alone_or_partial_at_end_of_stream() {
    assert_eq!(check(b"\xEF\xBB\xBF").items, vec![]);
    assert_eq!(check(b"\xEF\xBB").items, vec![]);
    assert_eq!(check(b"\xEF\xBB\xBF\n").items, vec![]);
}

#[test]
fn s_sse_2_bom_split_across_chunks_is_stripped() {
    // `check` splits at every offset, including inside the BOM; spelled out once here.
    let mut dec = SseDecoder::new();
    for b in b"\xEF\xBB\xBFdata: a\n\n" {
        dec.feed_bytes(Bytes::copy_from_slice(&[*b]));
    }
    assert_eq!(dec.next_event(), Ok(Some(ev("a"))));
}

#[test]
fn s_sse_2_invalid_utf8_in_data_passes_through_as_bytes() {
    let out = check(b"data: \xFF\xFE\x80ok\n\n");
    assert_eq!(out.data(), vec![b"\xFF\xFE\x80ok".to_vec()]);
}

#[test]
fn s_sse_2_invalid_utf8_in_event_and_id_is_replaced() {
    let out = check(b"event: a\xFFb\nid: 1\xC3\ndata: x\n\n");
    let e = &out.events()[0];
    assert_eq!(e.event.as_deref(), Some("a\u{FFFD}b"));
    assert_eq!(e.id.as_deref(), Some("1\u{FFFD}"));
    assert_eq!(out.last_event_id, "1\u{FFFD}");
}

#[test]
fn s_sse_2_non_ascii_utf8_is_kept() {
    let out = check("event: ünïcødé\nid: 🦀\ndata: héllo wörld ✓\n\n".as_bytes());
    let e = &out.events()[0];
    assert_eq!(e.event.as_deref(), Some("ünïcødé"));
    assert_eq!(e.id.as_deref(), Some("🦀"));
    assert_eq!(&e.data[..], "héllo wörld ✓".as_bytes());
}

// ----------------------------------------------------------------------------------------
// S-SSE-3: line ends
// ----------------------------------------------------------------------------------------

#[test]
fn s_sse_3_lf_line_ends() {
    assert_eq!(check(b"data: a\n\n").events(), vec![ev("a")]);
}

#[test]
fn s_sse_3_crlf_line_ends() {
    assert_eq!(check(b"data: a\r\n\r\n").events(), vec![ev("a")]);
}

#[test]
fn s_sse_3_lone_cr_line_ends() {
    assert_eq!(check(b"data: a\r\r").events(), vec![ev("a")]);
    assert_eq!(check(b"data: a\rdata: b\r\r").events(), vec![ev("a\nb")]);
}

#[test]
fn s_sse_3_mixed_line_ends() {
    let out = check(b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\n\n");
    assert_eq!(out.events(), vec![ev("a\nb\nc"), ev("d")]);
}

#[test]
fn s_sse_3_lf_cr_is_two_line_ends() {
    // LF ends "data: a", the CR ends an empty line: dispatch.
    assert_eq!(
        check(b"data: a\n\rdata: b\n\n").events(),
        vec![ev("a"), ev("b")]
    );
}

#[test]
fn s_sse_3_cr_cr_lf_is_two_line_ends() {
    assert_eq!(
        check(b"data: a\r\r\ndata: b\n\n").events(),
        vec![ev("a"), ev("b")]
    );
}

#[test]
fn s_sse_3_cr_at_chunk_end_then_lf_is_one_line_end() {
    let mut dec = SseDecoder::new();
    dec.feed(b"data: a\r");
    assert_eq!(dec.next_event(), Ok(None));
    dec.feed(b"\ndata: b\r");
    assert_eq!(dec.next_event(), Ok(None));
    dec.feed(b"\n\r");
    assert_eq!(dec.next_event(), Ok(Some(ev("a\nb"))));
    dec.feed(b"\n");
    dec.feed(b"data: c\n\n");
    assert_eq!(dec.next_event(), Ok(Some(ev("c"))));
    assert_eq!(dec.next_event(), Ok(None));
}

#[test]
fn s_sse_3_cr_at_chunk_end_dispatches_immediately() {
    // The blank line is complete at its CR; the event need not wait for a possible LF.
    let mut dec = SseDecoder::new();
    dec.feed_bytes(Bytes::from_static(b"data: a\r\n\r"));
    assert_eq!(dec.next_event(), Ok(Some(ev("a"))));
    dec.feed_bytes(Bytes::from_static(b"\ndata: b\r\n\r\n"));
    assert_eq!(dec.next_event(), Ok(Some(ev("b"))));
}

#[test]
fn s_sse_3_many_crlf_events_python_sdk_style() {
    // The Python SDK (sse-starlette) ends lines with CRLF.
    let input = b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n\
        : ping - 2025-01-01 00:00:00.000000+00:00\r\n\r\n\
        event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\n";
    let out = check(input);
    assert_eq!(out.events().len(), 2);
    assert!(out.events().iter().all(SseEvent::is_message));
    assert_eq!(
        &out.events()[0].data[..],
        br#"{"jsonrpc":"2.0","id":1,"result":{}}"#
    );
}

// ----------------------------------------------------------------------------------------
// S-SSE-4 / S-SSE-5: initial state and dispatch on empty line
// ----------------------------------------------------------------------------------------

#[test]
fn s_sse_4_initial_state_is_empty() {
    let mut dec = SseDecoder::new();
    assert_eq!(dec.last_event_id(), "");
    assert_eq!(dec.retry(), None);
    assert!(!dec.is_finished());
    assert_eq!(dec.next_event(), Ok(None));
    assert_eq!(dec.buffered_len(), 0);
    assert_eq!(dec.limits(), SseLimits::default());
    assert_eq!(SseLimits::default().max_line_bytes, 16 * 1024 * 1024);
    assert_eq!(SseLimits::default().max_event_bytes, 16 * 1024 * 1024);
}

#[test]
fn s_sse_5_empty_line_dispatches() {
    assert_eq!(
        check(b"data: a\n\ndata: b\n\n").events(),
        vec![ev("a"), ev("b")]
    );
}

#[test]
fn s_sse_5_repeated_empty_lines_dispatch_nothing_more() {
    assert_eq!(check(b"\n\n\ndata: a\n\n\n\n").events(), vec![ev("a")]);
}

#[test]
fn s_sse_5_event_waits_for_empty_line() {
    let mut dec = SseDecoder::new();
    dec.feed(b"data: a\n");
    assert_eq!(dec.next_event(), Ok(None));
    dec.feed(b"\n");
    assert_eq!(dec.next_event(), Ok(Some(ev("a"))));
}

// ----------------------------------------------------------------------------------------
// S-SSE-6: comments
// ----------------------------------------------------------------------------------------

#[test]
fn s_sse_6_comment_lines_are_ignored() {
    let out = check(b": hello\ndata: a\n:\n: data: no\ndata: b\n\n");
    assert_eq!(out.events(), vec![ev("a\nb")]);
}

#[test]
fn s_sse_6_keep_alive_comments_between_events() {
    let out = check(b": keep-alive\n\ndata: a\n\n:ping\n\n: ping\r\n\r\ndata: b\n\n:\n\n");
    assert_eq!(out.events(), vec![ev("a"), ev("b")]);
}

#[test]
fn s_sse_6_comment_only_stream_yields_nothing() {
    let out = check(b": ping\n\n: ping\n\n: ping\n\n");
    assert_eq!(out.items, vec![]);
}

// ----------------------------------------------------------------------------------------
// S-SSE-7 / S-SSE-8: field and value
// ----------------------------------------------------------------------------------------

#[test]
fn s_sse_7_value_after_first_colon() {
    let out = check(b"data: a: b:c\n\n");
    assert_eq!(out.data(), vec![b"a: b:c".to_vec()]);
}

#[test]
fn s_sse_7_one_leading_space_stripped() {
    let out = check(b"data:  two\n\ndata:none\n\ndata:\ttab\n\nevent:  e\ndata: x\n\n");
    assert_eq!(out.data()[0], b" two");
    assert_eq!(out.data()[1], b"none");
    assert_eq!(out.data()[2], b"\ttab");
    assert_eq!(out.events()[3].event.as_deref(), Some(" e"));
}

#[test]
fn s_sse_7_value_of_only_a_space_is_empty() {
    let out = check(b"data: \n\n");
    assert_eq!(out.events(), vec![ev("")]);
}

#[test]
fn s_sse_8_line_without_colon_is_field_with_empty_value() {
    assert_eq!(check(b"data\n\n").events(), vec![ev("")]);
    // `event` alone sets an empty type, i.e. "message".
    let out = check(b"event: x\nevent\ndata: a\n\n");
    assert_eq!(out.events(), vec![ev("a")]);
    // `id` alone resets the id.
    let out = check(b"id: 1\ndata: a\n\nid\ndata: b\n\n");
    assert_eq!(out.events()[1].id, None);
    assert_eq!(out.last_event_id, "");
}

#[test]
fn s_sse_8_unknown_field_without_colon_is_ignored() {
    assert_eq!(check(b"hello\ndata: a\n\n").events(), vec![ev("a")]);
}

// ----------------------------------------------------------------------------------------
// S-SSE-9: field names, data, event
// ----------------------------------------------------------------------------------------

#[test]
fn s_sse_9_field_names_are_case_sensitive() {
    let out = check(b"Data: a\nDATA: b\nEvent: x\nID: 1\nRetry: 5\ndata: c\n\n");
    assert_eq!(out.events(), vec![ev("c")]);
    assert_eq!(out.retry, None);
    assert_eq!(out.last_event_id, "");
}

#[test]
fn s_sse_9_field_name_with_space_is_unknown() {
    let out = check(b"data : a\n data: b\ndata: c\n\n");
    assert_eq!(out.events(), vec![ev("c")]);
}

#[test]
fn s_sse_9_data_lines_joined_with_lf() {
    let out = check(b"data: a\ndata: b\ndata:\ndata: c\n\n");
    assert_eq!(out.events(), vec![ev("a\nb\n\nc")]);
}

#[test]
fn s_sse_9_event_type_last_wins() {
    let out = check(b"event: a\nevent: b\ndata: x\n\n");
    assert_eq!(out.events()[0].event.as_deref(), Some("b"));
}

#[test]
fn s_sse_9_event_type_resets_after_dispatch() {
    let out = check(b"event: a\ndata: x\n\ndata: y\n\n");
    assert_eq!(out.events()[0].event.as_deref(), Some("a"));
    assert_eq!(out.events()[1].event, None);
}

#[test]
fn s_sse_9_event_type_resets_even_without_dispatch() {
    let out = check(b"event: a\n\ndata: y\n\n");
    assert_eq!(out.events(), vec![ev("y")]);
}

#[test]
fn s_sse_9_unknown_fields_are_ignored() {
    let out = check(b"foo: bar\n:x\nx-custom\ndata: a\nfoo\n\n");
    assert_eq!(out.events(), vec![ev("a")]);
}

// ----------------------------------------------------------------------------------------
// S-SSE-10: id
// ----------------------------------------------------------------------------------------

#[test]
fn s_sse_10_id_sets_last_event_id() {
    let out = check(b"id: 42\ndata: a\n\n");
    assert_eq!(out.events()[0].id.as_deref(), Some("42"));
    assert_eq!(out.last_event_id, "42");
}

#[test]
fn s_sse_10_id_with_nul_is_ignored() {
    let out = check(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n");
    assert_eq!(out.events()[1].id.as_deref(), Some("1"));
    assert_eq!(out.last_event_id, "1");
}

#[test]
fn s_sse_10_empty_id_resets_last_event_id() {
    let out = check(b"id: 1\ndata: a\n\nid:\ndata: b\n\n");
    assert_eq!(out.events()[0].id.as_deref(), Some("1"));
    assert_eq!(out.events()[1].id, None);
    assert_eq!(out.last_event_id, "");
    let out = check(b"id: 1\ndata: a\n\nid: \ndata: b\n\n");
    assert_eq!(out.events()[1].id, None);
}

#[test]
fn s_sse_10_id_last_wins_within_event() {
    let out = check(b"id: 1\nid: 2\ndata: a\n\n");
    assert_eq!(out.events()[0].id.as_deref(), Some("2"));
}

#[test]
fn s_sse_10_id_keeps_spaces_after_the_first() {
    let out = check(b"id:  x \ndata: a\n\n");
    assert_eq!(out.events()[0].id.as_deref(), Some(" x "));
}

#[test]
fn s_sse_12_id_carries_over_to_later_events() {
    let out = check(b"id: 7\ndata: a\n\ndata: b\n\n");
    assert_eq!(out.events()[0].id.as_deref(), Some("7"));
    assert_eq!(out.events()[1].id.as_deref(), Some("7"));
}

#[test]
fn s_sse_12_last_event_id_updated_at_blank_line_without_dispatch() {
    let mut dec = SseDecoder::new();
    dec.feed(b"id: 5\n");
    assert_eq!(dec.next_event(), Ok(None));
    // Not yet: the id buffer only reaches the last event ID at the blank line.
    assert_eq!(dec.last_event_id(), "");
    dec.feed(b"\n");
    assert_eq!(dec.next_event(), Ok(None));
    assert_eq!(dec.last_event_id(), "5");
    let out = check(b"id: 5\n\n");
    assert_eq!(out.items, vec![]);
    assert_eq!(out.last_event_id, "5");
}

#[test]
fn s_sse_13_id_of_incomplete_event_is_not_applied() {
    let out = check(b"id: 1\ndata: a\n\nid: 2\ndata: b\n");
    assert_eq!(out.events().len(), 1);
    assert_eq!(out.last_event_id, "1");
}

// ----------------------------------------------------------------------------------------
// S-SSE-11: retry
// ----------------------------------------------------------------------------------------

#[test]
fn s_sse_11_retry_rmcp_style() {
    // rmcp sends the reconnection time with its priming event.
    let out = check(b"retry: 3000\nid: 0\ndata:\n\n");
    assert_eq!(out.retry, Some(Duration::from_millis(3000)));
    let e = &out.events()[0];
    assert_eq!(e.retry, Some(Duration::from_millis(3000)));
    assert!(e.is_priming());
}

#[test]
fn s_sse_11_retry_alone_is_not_an_event_but_is_applied() {
    let out = check(b"retry: 1500\n\n");
    assert_eq!(out.items, vec![]);
    assert_eq!(out.retry, Some(Duration::from_millis(1500)));
}

#[test]
fn s_sse_11_retry_applies_immediately_without_blank_line() {
    let mut dec = SseDecoder::new();
    dec.feed(b"retry: 10\n");
    assert_eq!(dec.next_event(), Ok(None));
    assert_eq!(dec.retry(), Some(Duration::from_millis(10)));
}

#[test]
fn s_sse_11_retry_non_digits_ignored() {
    for bad in [
        &b"retry: 3s"[..],
        b"retry: -1",
        b"retry: +1",
        b"retry: 1.5",
        b"retry:  10",
        b"retry: 10 ",
        b"retry: 0x10",
        b"retry:",
        b"retry",
        b"retry: \xd9\xa3", // ARABIC-INDIC DIGIT THREE is not an ASCII digit
    ] {
        let mut input = b"retry: 7\n".to_vec();
        input.extend_from_slice(bad);
        input.extend_from_slice(b"\ndata: a\n\n");
        let out = check(&input);
        assert_eq!(out.retry, Some(Duration::from_millis(7)), "{bad:?}");
    }
}

#[test]
fn s_sse_11_retry_leading_zeros_and_zero() {
    assert_eq!(check(b"retry: 0\n").retry, Some(Duration::ZERO));
    assert_eq!(
        check(b"retry:00042\n").retry,
        Some(Duration::from_millis(42))
    );
}

#[test]
fn s_sse_11_retry_overflow_is_ignored() {
    let out = check(b"retry: 5\nretry: 18446744073709551616\n");
    assert_eq!(out.retry, Some(Duration::from_millis(5)));
    let out = check(b"retry: 18446744073709551615\n");
    assert_eq!(out.retry, Some(Duration::from_millis(u64::MAX)));
    let out = check(b"retry: 5\nretry: 99999999999999999999999999999999\n");
    assert_eq!(out.retry, Some(Duration::from_millis(5)));
}

#[test]
fn s_sse_11_event_retry_is_per_event() {
    let out = check(b"retry: 1\ndata: a\n\ndata: b\n\n");
    assert_eq!(out.events()[0].retry, Some(Duration::from_millis(1)));
    assert_eq!(out.events()[1].retry, None);
    assert_eq!(out.retry, Some(Duration::from_millis(1)));
}

// ----------------------------------------------------------------------------------------
// S-SSE-12 / S-SSE-13 / S-SSE-14: dispatch, end of stream, spec examples
// ----------------------------------------------------------------------------------------

#[test]
fn s_sse_12_empty_data_buffer_not_dispatched() {
    let out = check(b"event: x\nid: 3\n\n");
    assert_eq!(out.items, vec![]);
    assert_eq!(out.last_event_id, "3");
}

#[test]
fn s_sse_12_only_one_trailing_lf_removed() {
    let out = check(b"data: a\ndata:\n\n");
    assert_eq!(out.events(), vec![ev("a\n")]);
    let out = check(b"data:\ndata:\n\n");
    assert_eq!(out.events(), vec![ev("\n")]);
}

#[test]
fn s_sse_13_incomplete_event_discarded_at_end() {
    let out = check(b"data: a\n\ndata: b\n");
    assert_eq!(out.events(), vec![ev("a")]);
    let out = check(b"data: a\n\ndata: b");
    assert_eq!(out.events(), vec![ev("a")]);
    let out = check(b"data: a");
    assert_eq!(out.items, vec![]);
}

#[test]
fn s_sse_13_cr_at_very_end_still_ends_the_line() {
    assert_eq!(check(b"data: a\n\r").events(), vec![ev("a")]);
}

#[test]
fn s_sse_13_finish_then_complete_events_still_returned() {
    let mut dec = SseDecoder::new();
    dec.feed(b"data: a\n\ndata: b\n\ndata: c");
    dec.finish();
    assert!(!dec.is_finished());
    assert_eq!(dec.next_event(), Ok(Some(ev("a"))));
    assert_eq!(dec.next_event(), Ok(Some(ev("b"))));
    assert_eq!(dec.next_event(), Ok(None));
    assert!(dec.is_finished());
    assert_eq!(dec.buffered_len(), 0);
    // Input after finish is ignored.
    dec.feed(b"\n\n");
    dec.feed_bytes(Bytes::from_static(b"data: d\n\n"));
    assert_eq!(dec.next_event(), Ok(None));
    dec.finish();
    assert!(dec.is_finished());
}

#[test]
fn s_sse_14_spec_examples() {
    // "data" alone and "data:" alone fire an event with data "".
    assert_eq!(check(b"data\n\n").events(), vec![ev("")]);
    assert_eq!(check(b"data:\n\n").events(), vec![ev("")]);
    // "data\ndata" fires "\n".
    assert_eq!(check(b"data\ndata\n\n").events(), vec![ev("\n")]);
    // "data:test" equals "data: test".
    assert_eq!(
        check(b"data:test\n\n").events(),
        check(b"data: test\n\n").events()
    );
    // The spec's first example stream.
    let out = check(b"data: YHOO\ndata: +2\ndata: 10\n\n");
    assert_eq!(out.events(), vec![ev("YHOO\n+2\n10")]);
    // Its second: comment, two events with ids and an event without.
    let out = check(
        b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n",
    );
    assert_eq!(out.events()[0].id.as_deref(), Some("1"));
    assert_eq!(&out.events()[1].data[..], b"second event");
    assert_eq!(out.events()[1].id, None);
    assert_eq!(&out.events()[2].data[..], b" third event");
}

// ----------------------------------------------------------------------------------------
// S-SSE-18: MCP priming and message events
// ----------------------------------------------------------------------------------------

#[test]
fn s_sse_18_priming_event_typescript_sdk_style() {
    let out = check(
        b"id: 0a1b\ndata:\n\nevent: message\nid: 0a1c\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
    );
    let evs = out.events();
    assert_eq!(evs.len(), 2);
    assert!(evs[0].is_priming());
    assert!(evs[0].is_message());
    assert_eq!(evs[0].id.as_deref(), Some("0a1b"));
    assert!(!evs[1].is_priming());
    assert!(evs[1].is_message());
    assert_eq!(out.last_event_id, "0a1c");
}

#[test]
fn s_sse_18_priming_with_space_after_colon() {
    let out = check(b"id: x\ndata: \n\n");
    assert!(out.events()[0].is_priming());
}

#[test]
fn s_sse_18_other_event_types_are_not_messages() {
    let out = check(b"event: endpoint\ndata: /messages?session=1\n\nevent: message\ndata: {}\n\n");
    assert!(!out.events()[0].is_message());
    assert!(out.events()[1].is_message());
}

// ----------------------------------------------------------------------------------------
// Real-world-style streams, zero copy, large events
// ----------------------------------------------------------------------------------------

#[test]
fn s_sse_9_many_events_in_one_chunk() {
    let mut input = Vec::new();
    for i in 0..50 {
        input.extend_from_slice(format!("id: {i}\ndata: {{\"n\":{i}}}\n\n").as_bytes());
        if i % 10 == 0 {
            input.extend_from_slice(b": keep-alive\n\n");
        }
    }
    let out = check_large(&input, SseLimits::default());
    assert_eq!(out.events().len(), 50);
    assert_eq!(out.last_event_id, "49");
    assert_eq!(&out.events()[7].data[..], br#"{"n":7}"#);
}

#[test]
fn s_sse_9_one_mib_single_line_event() {
    let payload: Vec<u8> = (0..1024 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
    let mut input = b"id: big\r\ndata: ".to_vec();
    input.extend_from_slice(&payload);
    input.extend_from_slice(b"\r\n\r\ndata: after\r\n\r\n");
    let out = check_large(&input, SseLimits::default());
    let evs = out.events();
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[0].data.len(), payload.len());
    assert!(evs[0].data[..] == payload[..]);
    assert_eq!(&evs[1].data[..], b"after");
}

#[test]
fn s_sse_9_feed_bytes_single_line_data_is_zero_copy() {
    let input = Bytes::from_static(b"id: 1\ndata: hello world\n\ndata: a\ndata: b\n\n");
    let range = input.as_ptr() as usize..input.as_ptr() as usize + input.len();
    let mut dec = SseDecoder::new();
    dec.feed_bytes(input.clone());
    let e = dec.next_event().unwrap().unwrap();
    assert_eq!(&e.data[..], b"hello world");
    assert!(
        range.contains(&(e.data.as_ptr() as usize)),
        "data was copied"
    );
    let e = dec.next_event().unwrap().unwrap();
    assert_eq!(&e.data[..], b"a\nb");
    assert!(!range.contains(&(e.data.as_ptr() as usize)));
}

#[test]
fn s_sse_9_line_across_chunks_is_assembled_then_not_copied_again() {
    let mut dec = SseDecoder::new();
    dec.feed_bytes(Bytes::from_static(b"data: hel"));
    assert_eq!(dec.next_event(), Ok(None));
    dec.feed_bytes(Bytes::from_static(b"lo\n\ndata: x\n\n"));
    assert_eq!(dec.next_event(), Ok(Some(ev("hello"))));
    assert_eq!(dec.next_event(), Ok(Some(ev("x"))));
    assert_eq!(dec.next_event(), Ok(None));
}

#[test]
fn s_sse_9_mixing_feed_and_feed_bytes_keeps_order() {
    let mut dec = SseDecoder::new();
    dec.feed(b"data: a");
    dec.feed_bytes(Bytes::from_static(b"b\n\ndata: c\n"));
    dec.feed(b"\ndata: d");
    dec.feed_bytes(Bytes::from_static(b"\n"));
    dec.feed(b"\n");
    assert_eq!(dec.next_event(), Ok(Some(ev("ab"))));
    assert_eq!(dec.next_event(), Ok(Some(ev("c"))));
    assert_eq!(dec.next_event(), Ok(Some(ev("d"))));
    assert_eq!(dec.next_event(), Ok(None));
}

#[test]
fn s_sse_9_empty_chunks_are_no_ops() {
    let mut dec = SseDecoder::new();
    dec.feed(b"");
    dec.feed_bytes(Bytes::new());
    dec.feed(b"\xEF");
    dec.feed(b"");
    dec.feed(b"\xBB\xBFdata: a\n");
    dec.feed_bytes(Bytes::new());
    dec.feed(b"\n");
    assert_eq!(dec.next_event(), Ok(Some(ev("a"))));
}

// ----------------------------------------------------------------------------------------
// Limits
// ----------------------------------------------------------------------------------------

#[test]
fn limits_line_at_limit_is_accepted() {
    // "data: abcd" is 10 bytes.
    let out = check_with(b"data: abcd\n\n", limits(10, 100));
    assert_eq!(out.events(), vec![ev("abcd")]);
}

#[test]
fn limits_line_over_limit_fails_after_earlier_events() {
    let out = check_with(b"data: a\n\ndata: abcde\n\ndata: b\n\n", limits(10, 100));
    assert_eq!(
        out.items,
        vec![Ok(ev("a")), Err(SseError::LineTooLong { limit: 10 })]
    );
}

#[test]
fn limits_incomplete_line_over_limit_fails_without_line_end() {
    let out = check_with(b"data: a\n\ndata: abcdefghijk", limits(10, 100));
    assert_eq!(
        out.items,
        vec![Ok(ev("a")), Err(SseError::LineTooLong { limit: 10 })]
    );
}

#[test]
fn limits_comment_and_unknown_lines_count_too() {
    let out = check_with(b": 0123456789ab\n", limits(10, 100));
    assert_eq!(out.error(), Some(SseError::LineTooLong { limit: 10 }));
    let out = check_with(b"unknownfield\n", limits(10, 100));
    assert_eq!(out.error(), Some(SseError::LineTooLong { limit: 10 }));
}

#[test]
fn limits_bom_does_not_count_towards_line() {
    let out = check_with(b"\xEF\xBB\xBFdata: abcd\n\n", limits(10, 100));
    assert_eq!(out.events(), vec![ev("abcd")]);
}

#[test]
fn limits_event_data_at_limit_is_accepted() {
    // "ab\ncd\nef" is 8 bytes.
    let out = check_with(b"data: ab\ndata: cd\ndata: ef\n\n", limits(100, 8));
    assert_eq!(out.events(), vec![ev("ab\ncd\nef")]);
}

#[test]
fn limits_event_data_over_limit_fails() {
    let out = check_with(
        b"data: x\n\ndata: ab\ndata: cd\ndata: efg\n\n",
        limits(100, 8),
    );
    assert_eq!(
        out.items,
        vec![Ok(ev("x")), Err(SseError::EventTooLarge { limit: 8 })]
    );
    let out = check_with(b"data: 123456789\n\n", limits(100, 8));
    assert_eq!(out.items, vec![Err(SseError::EventTooLarge { limit: 8 })]);
}

#[test]
fn limits_empty_data_lines_count_their_separators() {
    // Five empty lines join to "\n\n\n\n" (4 bytes).
    let input = b"data\ndata\ndata\ndata\ndata\n\n";
    assert_eq!(
        check_with(input, limits(100, 4)).events(),
        vec![ev("\n\n\n\n")]
    );
    assert_eq!(
        check_with(input, limits(100, 3)).error(),
        Some(SseError::EventTooLarge { limit: 3 })
    );
}

#[test]
fn limits_errors_are_sticky_and_release_memory() {
    let mut dec = SseDecoder::with_limits(limits(8, 8));
    dec.feed(b"data: 0123456789\n\n");
    let err = SseError::LineTooLong { limit: 8 };
    assert_eq!(dec.next_event(), Err(err.clone()));
    assert_eq!(dec.buffered_len(), 0);
    dec.feed(b"data: a\n\n");
    dec.feed_bytes(Bytes::from_static(b"data: a\n\n"));
    assert_eq!(dec.next_event(), Err(err.clone()));
    dec.finish();
    assert_eq!(dec.next_event(), Err(err));
    assert!(dec.is_finished());
    assert_eq!(dec.buffered_len(), 0);
}

#[test]
fn limits_endless_line_in_small_chunks_stays_bounded() {
    let limit = 4096;
    let mut dec = SseDecoder::with_limits(limits(limit, limit));
    let chunk = [b'x'; 100];
    for i in 0.. {
        if i % 2 == 0 {
            dec.feed(&chunk);
        } else {
            dec.feed_bytes(Bytes::copy_from_slice(&chunk));
        }
        match dec.next_event() {
            Ok(None) => assert!(dec.buffered_len() <= limit),
            Err(e) => {
                assert_eq!(e, SseError::LineTooLong { limit });
                assert!(i * 100 <= limit + 100);
                break;
            }
            Ok(Some(_)) => unreachable!(),
        }
    }
}

#[test]
fn limits_zero_rejects_any_non_empty_line() {
    assert_eq!(check_with(b"\n\r\n\r", limits(0, 0)).items, vec![]);
    assert_eq!(
        check_with(b"\n\nx", limits(0, 0)).error(),
        Some(SseError::LineTooLong { limit: 0 })
    );
    // data with an empty value fits a 0-byte event.
    let out = check_with(b"data\n\n", limits(4, 0));
    assert_eq!(out.events(), vec![ev("")]);
}

#[test]
fn limits_error_messages() {
    assert_eq!(
        SseError::LineTooLong { limit: 5 }.to_string(),
        "SSE line longer than the limit of 5 bytes"
    );
    assert_eq!(
        SseError::EventTooLarge { limit: 5 }.to_string(),
        "SSE event data larger than the limit of 5 bytes"
    );
}

// ----------------------------------------------------------------------------------------
// Encoder (S-SSE-16, S-SSE-17, S-SSE-18)
// ----------------------------------------------------------------------------------------

#[test]
fn s_sse_17_data_split_on_cr_lf_crlf() {
    let f = SseFrame::data(b"a\nb\rc\r\nd").encode().unwrap();
    assert_eq!(&f[..], b"data: a\ndata: b\ndata: c\ndata: d\n\n");
    let out = check(&f);
    assert_eq!(out.events(), vec![ev("a\nb\nc\nd")]);
}

#[test]
fn s_sse_17_data_edge_cases() {
    assert_eq!(&SseFrame::data(b"").encode().unwrap()[..], b"data:\n\n");
    assert_eq!(
        &SseFrame::data(b"\n").encode().unwrap()[..],
        b"data:\ndata:\n\n"
    );
    assert_eq!(
        &SseFrame::data(b"a\r\n").encode().unwrap()[..],
        b"data: a\ndata:\n\n"
    );
    assert_eq!(
        &SseFrame::data(b" lead").encode().unwrap()[..],
        b"data:  lead\n\n"
    );
    assert_eq!(check(b"data:  lead\n\n").data(), vec![b" lead".to_vec()]);
}

#[test]
fn s_sse_17_all_fields() {
    let f = SseFrame::data(b"{}")
        .id("s/1")
        .event("message")
        .retry(Duration::from_millis(2500))
        .encode()
        .unwrap();
    assert_eq!(
        &f[..],
        b"id: s/1\nevent: message\nretry: 2500\ndata: {}\n\n"
    );
    let e = &check(&f).events()[0];
    assert_eq!(e.id.as_deref(), Some("s/1"));
    assert_eq!(e.event.as_deref(), Some("message"));
    assert_eq!(e.retry, Some(Duration::from_millis(2500)));
}

#[test]
fn s_sse_17_frame_without_data_is_not_dispatched() {
    let f = SseFrame::new()
        .retry(Duration::from_secs(3))
        .encode()
        .unwrap();
    assert_eq!(&f[..], b"retry: 3000\n\n");
    let out = check(&f);
    assert_eq!(out.items, vec![]);
    assert_eq!(out.retry, Some(Duration::from_secs(3)));
    assert_eq!(&SseFrame::new().encode().unwrap()[..], b"\n");
}

#[test]
fn s_sse_17_empty_id_resets() {
    let f = SseFrame::data(b"x").id("").encode().unwrap();
    assert_eq!(&f[..], b"id:\ndata: x\n\n");
}

#[test]
fn s_sse_17_invalid_id_and_event_rejected() {
    for bad in ["a\nb", "a\rb", "a\0b"] {
        assert_eq!(
            SseFrame::data(b"x").id(bad).encode(),
            Err(SseEncodeError::InvalidId)
        );
    }
    assert_eq!(
        SseFrame::data(b"x").event("a\nb").encode(),
        Err(SseEncodeError::InvalidEventType)
    );
    let mut out = bytes::BytesMut::from(&b"keep"[..]);
    assert!(SseFrame::data(b"x").id("\n").encode_into(&mut out).is_err());
    assert_eq!(&out[..], b"keep");
}

#[test]
fn s_sse_17_retry_written_in_whole_milliseconds() {
    let f = SseFrame::new()
        .retry(Duration::from_micros(1999))
        .encode()
        .unwrap();
    assert_eq!(&f[..], b"retry: 1\n\n");
    let f = SseFrame::new().retry(Duration::MAX).encode().unwrap();
    assert_eq!(&f[..], b"retry: 18446744073709551615\n\n");
}

#[test]
fn s_sse_16_comment_frames() {
    assert_eq!(&encode_comment("")[..], b":\n\n");
    assert_eq!(&encode_comment("ping")[..], b": ping\n\n");
    assert_eq!(&encode_comment("a\r\nb\nc")[..], b": a\n: b\n: c\n\n");
    assert_eq!(check(&encode_comment("a\nb\rc")).items, vec![]);
}

#[test]
fn s_sse_18_encode_priming() {
    let f = encode_priming("s1/0", None).unwrap();
    assert_eq!(&f[..], b"id: s1/0\ndata:\n\n");
    let f = encode_priming("s1/0", Some(Duration::from_secs(1))).unwrap();
    assert_eq!(&f[..], b"id: s1/0\nretry: 1000\ndata:\n\n");
    let out = check(&f);
    assert!(out.events()[0].is_priming());
    assert_eq!(out.last_event_id, "s1/0");
    assert_eq!(encode_priming("a\nb", None), Err(SseEncodeError::InvalidId));
}

#[test]
fn s_sse_17_encoder_reuses_buffer_and_frames_are_independent() {
    let mut enc = SseEncoder::new();
    let a = enc.event(&SseFrame::data(b"one").id("1")).unwrap();
    let b = enc.comment("ka");
    let c = enc.priming("2", None).unwrap();
    let d = encode_event(&SseFrame::data(b"two\nlines")).unwrap();
    assert_eq!(&a[..], b"id: 1\ndata: one\n\n");
    assert_eq!(&b[..], b": ka\n\n");
    assert_eq!(&c[..], b"id: 2\ndata:\n\n");
    let mut all = Vec::new();
    for f in [&a, &b, &c, &d] {
        all.extend_from_slice(f);
    }
    let out = check_large(&all, SseLimits::default());
    assert_eq!(out.events().len(), 3);
    assert_eq!(&out.events()[2].data[..], b"two\nlines");
    assert_eq!(out.events()[2].id.as_deref(), Some("2"));
}
