//! Property tests of the SSE codec.
//!
//! - `s_sse_17_decode_of_encode_is_identity`: frames from [`SseFrame`] decode back to the same
//!   events under arbitrary chunking, with data line ends normalized to LF (the one lossy
//!   step of the format, S-SSE-17) and the last event ID carried over (S-SSE-12).
//! - `s_sse_3_chunking_never_changes_the_result`: token soup of SSE syntax decodes to the
//!   same outcome as the naive reference decoder, however it is chunked and whatever the
//!   limits.

use std::time::Duration;

use bytes::Bytes;
use mcp_proto::fuzzing::sse::{DecodeRun, reference_decode};
use mcp_proto::sse::{
    SseDecoder, SseError, SseEvent, SseFrame, SseLimits, encode_comment, encode_priming,
};
use proptest::prelude::*;

/// An outgoing frame, owned.
#[derive(Debug, Clone)]
enum Out {
    Frame {
        id: Option<String>,
        event: Option<String>,
        retry: Option<u64>,
        data: Option<String>,
    },
    Comment(String),
    Priming {
        id: String,
        retry: Option<u64>,
    },
}

/// Text with CR, LF, CRLF, spaces, colons and non-ASCII characters.
fn text_with_line_ends() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("\r".to_owned()),
            Just("\n".to_owned()),
            Just("\r\n".to_owned()),
            Just(" ".to_owned()),
            Just(":".to_owned()),
            Just("data: ".to_owned()),
            Just("é".to_owned()),
            Just("🦀".to_owned()),
            Just("\u{FEFF}".to_owned()),
            "[a-z{}\",0-9]{1,12}",
            "\\PC{1,4}",
        ],
        0..12,
    )
    .prop_map(|parts| parts.concat())
}

/// A single-line value (no CR, LF, NUL), possibly with leading spaces and non-ASCII text.
fn line_value() -> impl Strategy<Value = String> {
    "[ a-zA-Z0-9/:é🦀\u{FEFF}-]{0,16}"
}

fn out_frame() -> impl Strategy<Value = Out> {
    prop_oneof![
        6 => (
            prop::option::of(line_value()),
            prop::option::of(line_value()),
            prop::option::of(0u64..100_000),
            prop::option::weighted(0.85, text_with_line_ends()),
        )
            .prop_map(|(id, event, retry, data)| Out::Frame {
                id,
                event,
                retry,
                data,
            }),
        1 => text_with_line_ends().prop_map(Out::Comment),
        1 => (line_value(), prop::option::of(0u64..10_000))
            .prop_map(|(id, retry)| Out::Priming { id, retry }),
    ]
}

/// Encodes `frames`, and computes the events and final state a decoder must produce.
fn encode_and_model(frames: &[Out]) -> (Vec<u8>, Vec<SseEvent>, String, Option<Duration>) {
    let mut wire = Vec::new();
    let mut events = Vec::new();
    let mut last_id = String::new();
    let mut last_retry = None;
    for f in frames {
        match f {
            Out::Frame {
                id,
                event,
                retry,
                data,
            } => {
                let retry = retry.map(Duration::from_millis);
                let frame = SseFrame {
                    id: id.as_deref(),
                    event: event.as_deref(),
                    retry,
                    data: data.as_deref().map(str::as_bytes),
                };
                wire.extend_from_slice(&frame.encode().expect("valid frame"));
                if let Some(id) = id {
                    last_id.clone_from(id);
                }
                if retry.is_some() {
                    last_retry = retry;
                }
                if let Some(data) = data {
                    let normalized = data.replace("\r\n", "\n").replace('\r', "\n");
                    events.push(SseEvent {
                        event: event.as_deref().filter(|e| !e.is_empty()).map(Into::into),
                        data: Bytes::from(normalized),
                        id: (!last_id.is_empty()).then(|| last_id.as_str().into()),
                        retry,
                    });
                }
            }
            Out::Comment(text) => wire.extend_from_slice(&encode_comment(text)),
            Out::Priming { id, retry } => {
                let retry = retry.map(Duration::from_millis);
                wire.extend_from_slice(&encode_priming(id, retry).expect("valid id"));
                last_id.clone_from(id);
                if retry.is_some() {
                    last_retry = retry;
                }
                events.push(SseEvent {
                    event: None,
                    data: Bytes::new(),
                    id: (!last_id.is_empty()).then(|| last_id.as_str().into()),
                    retry,
                });
            }
        }
    }
    (wire, events, last_id, last_retry)
}

/// Splits `input` at the given cut points (taken modulo its length, sorted).
fn chunks<'a>(input: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = cuts
        .iter()
        .map(|c| c % (input.len() + 1))
        .chain([0, input.len()])
        .collect();
    cuts.sort_unstable();
    cuts.windows(2).map(|w| &input[w[0]..w[1]]).collect()
}

/// Decodes `pieces`, choosing `feed` / `feed_bytes` and whether to drain per piece from
/// `modes` (cycled).
fn decode(limits: SseLimits, pieces: &[&[u8]], modes: &[u8]) -> DecodeRun {
    let mut dec = SseDecoder::with_limits(limits);
    let mut items: Vec<Result<SseEvent, SseError>> = Vec::new();
    let mut failed = false;
    let drain = |dec: &mut SseDecoder, items: &mut Vec<_>, failed: &mut bool| {
        while !*failed {
            match dec.next_event() {
                Ok(Some(e)) => items.push(Ok(e)),
                Ok(None) => break,
                Err(e) => {
                    items.push(Err(e));
                    *failed = true;
                }
            }
        }
    };
    for (i, piece) in pieces.iter().enumerate() {
        let mode = modes.get(i % modes.len().max(1)).copied().unwrap_or(0);
        if mode & 1 == 0 {
            dec.feed(piece);
        } else {
            dec.feed_bytes(Bytes::copy_from_slice(piece));
        }
        if mode & 2 == 0 {
            drain(&mut dec, &mut items, &mut failed);
        }
    }
    dec.finish();
    drain(&mut dec, &mut items, &mut failed);
    assert!(dec.is_finished());
    DecodeRun {
        items,
        last_event_id: if failed {
            String::new()
        } else {
            dec.last_event_id().to_owned()
        },
        retry: if failed { None } else { dec.retry() },
    }
}

/// Fragments of SSE syntax, so that random inputs are mostly meaningful.
fn sse_soup() -> impl Strategy<Value = Vec<u8>> {
    const TOKENS: &[&[u8]] = &[
        b"data:",
        b"data: ",
        b"data",
        b"event: ",
        b"event",
        b"id: ",
        b"id",
        b"retry: ",
        b"retry",
        b":",
        b" ",
        b"\r",
        b"\n",
        b"\r\n",
        b"\n\n",
        b"\xEF\xBB\xBF",
        b"\xEF\xBB",
        b"\0",
        b"\xFF",
        b"3000",
        b"99999999999999999999",
        b"message",
        "é🦀".as_bytes(),
        b"{\"jsonrpc\":\"2.0\"}",
    ];
    prop::collection::vec(prop::sample::select(TOKENS), 0..40).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn s_sse_17_decode_of_encode_is_identity(
        frames in prop::collection::vec(out_frame(), 0..12),
        cuts in prop::collection::vec(any::<usize>(), 0..24),
        modes in prop::collection::vec(0u8..4, 1..8),
    ) {
        let (wire, events, last_id, last_retry) = encode_and_model(&frames);
        let out = decode(SseLimits::default(), &chunks(&wire, &cuts), &modes);
        let got: Vec<SseEvent> = out.items.into_iter().map(|r| r.unwrap()).collect();
        prop_assert_eq!(got, events);
        prop_assert_eq!(out.last_event_id, last_id);
        prop_assert_eq!(out.retry, last_retry);
    }

    #[test]
    fn s_sse_3_chunking_never_changes_the_result(
        input in sse_soup(),
        cuts in prop::collection::vec(any::<usize>(), 0..16),
        modes in prop::collection::vec(0u8..4, 1..8),
        line in prop_oneof![Just(usize::MAX), 0usize..40],
        event in prop_oneof![Just(usize::MAX), 0usize..40],
    ) {
        let limits = SseLimits { max_line_bytes: line, max_event_bytes: event };
        let expected = reference_decode(&input, limits);
        prop_assert_eq!(decode(limits, &[&input], &[0]), expected.clone());
        prop_assert_eq!(decode(limits, &chunks(&input, &cuts), &modes), expected);
    }

    #[test]
    fn s_sse_13_arbitrary_bytes_never_panic_and_match_reference(
        input in prop::collection::vec(any::<u8>(), 0..256),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
        modes in prop::collection::vec(0u8..4, 1..4),
    ) {
        let limits = SseLimits { max_line_bytes: 64, max_event_bytes: 64 };
        let expected = reference_decode(&input, limits);
        prop_assert_eq!(decode(limits, &chunks(&input, &cuts), &modes), expected);
    }
}
