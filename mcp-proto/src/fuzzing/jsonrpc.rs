//! Fuzz body for the JSON-RPC envelope parser ([`crate::jsonrpc`]).
//!
//! The target (`fuzz/fuzz_targets/jsonrpc_parse.rs`) is one line calling [`jsonrpc_parse`];
//! the committed seeds are in `fuzz/seeds/jsonrpc_parse/` and the dictionary in
//! `fuzz/jsonrpc.dict`. Every check is an `assert!`: a panic is a finding.

use crate::jsonrpc::{
    Body, InvalidMessage, InvalidReason, Message, MessageKind, Outcome, ParseFailure, encode_batch,
    error_codes, parse_body, parse_message,
};

/// Parses `data` with [`parse_body`] and checks the result against itself.
///
/// - On success, every message re-encodes to bytes that parse back to an equal message
///   (a batch's valid messages re-encode as a batch that parses back to them), the accessors
///   agree with the kind, and [`parse_message`] agrees (the same message, or
///   [`InvalidReason::BatchNotAllowed`] for a batch).
/// - On failure, the code is `-32700` or `-32600`, a parse error carries no id, and the error
///   response built from it round-trips too.
/// - Appending whitespace never changes the outcome.
pub fn jsonrpc_parse(data: &[u8]) {
    let parsed = parse_body(data);
    let single = parse_message(data);
    match &parsed {
        Ok(Body::Single(m)) => {
            assert_eq!(
                single.as_ref(),
                Ok(m),
                "parse_message disagrees with parse_body"
            );
            check_message(m);
        }
        Ok(Body::Batch(items)) => {
            assert!(!items.is_empty(), "an empty batch was accepted");
            assert!(
                matches!(&single, Err(ParseFailure::Invalid(e)) if e.reason() == InvalidReason::BatchNotAllowed),
                "parse_message accepted a batch: {single:?}"
            );
            for item in items {
                match item {
                    Ok(m) => check_message(m),
                    Err(e) => check_invalid(e),
                }
            }
            let valid: Vec<Message> = items
                .iter()
                .filter_map(|i| i.as_ref().ok())
                .cloned()
                .collect();
            if !valid.is_empty() {
                let again = parse_body(&encode_batch(&valid));
                assert_eq!(again, Ok(Body::Batch(valid.into_iter().map(Ok).collect())));
            }
        }
        Err(failure) => {
            check_failure(failure);
            let Err(single) = &single else {
                panic!("parse_message accepted what parse_body refused: {single:?}");
            };
            // `parse_message` does not look inside arrays, so an array that `parse_body`
            // refuses for what is inside an element is simply "not allowed" there.
            let batch_refused = matches!(
                single,
                ParseFailure::Invalid(e) if e.reason() == InvalidReason::BatchNotAllowed
            );
            assert!(
                single.code() == failure.code() || batch_refused,
                "parse_message and parse_body disagree: {single:?} vs {failure:?}"
            );
        }
    }

    let mut padded = data.to_vec();
    padded.extend_from_slice(b" \r\n\t");
    match (&parsed, parse_body(&padded)) {
        (Ok(a), Ok(b)) => assert_eq!(*a, b, "trailing whitespace changed the body"),
        (Err(a), Err(b)) => assert_eq!(a.code(), b.code(), "trailing whitespace changed the code"),
        (a, b) => panic!("trailing whitespace changed the outcome: {a:?} vs {b:?}"),
    }
}

fn check_message(m: &Message) {
    let bytes = m.to_bytes();
    assert_eq!(
        parse_message(&bytes).as_ref(),
        Ok(m),
        "re-encoding does not round-trip: {}",
        String::from_utf8_lossy(&bytes)
    );
    let mut out = Vec::new();
    m.write_to(&mut out);
    assert_eq!(out, bytes, "write_to and to_bytes disagree");

    match m {
        Message::Request(r) => {
            assert_eq!(m.kind(), MessageKind::Request);
            assert_eq!(m.id(), Some(&r.id));
            assert_eq!(m.method(), Some(&*r.method));
            assert_eq!(r.to_bytes(), bytes);
        }
        Message::Notification(n) => {
            assert_eq!(m.kind(), MessageKind::Notification);
            assert_eq!(m.id(), None);
            assert_eq!(m.method(), Some(&*n.method));
            assert_eq!(n.to_bytes(), bytes);
        }
        Message::Response(r) => {
            assert_eq!(m.kind(), MessageKind::Response);
            assert_eq!(m.id(), r.id.as_ref());
            assert_eq!(m.method(), None);
            assert_eq!(r.to_bytes(), bytes);
            if matches!(r.outcome, Outcome::Result(_)) {
                assert!(
                    r.id.is_some(),
                    "a success response without an id was accepted"
                );
            }
        }
    }
    if let Some(params) = m.params() {
        assert!(
            params.get().starts_with('{'),
            "non-object params were accepted"
        );
    }
}

fn check_invalid(e: &InvalidMessage) {
    assert_eq!(e.code(), error_codes::INVALID_REQUEST);
    check_error_response(&e.to_error_response(), e.code(), e.id());
}

fn check_failure(f: &ParseFailure) {
    match f {
        ParseFailure::Parse(e) => {
            assert_eq!(f.code(), error_codes::PARSE_ERROR);
            assert_eq!(e.code(), error_codes::PARSE_ERROR);
            assert_eq!(f.id(), None, "a parse error carries an id");
            assert_eq!(f.apparent_kind(), None);
        }
        ParseFailure::Invalid(e) => {
            assert_eq!(f.code(), error_codes::INVALID_REQUEST);
            assert_eq!(f.id(), e.id());
            check_invalid(e);
        }
    }
    check_error_response(&f.to_error_response(), f.code(), f.id());
}

fn check_error_response(
    r: &crate::jsonrpc::Response,
    code: i64,
    id: Option<&crate::jsonrpc::RequestId>,
) {
    assert_eq!(
        r.id.as_ref(),
        id,
        "the error response does not echo the readable id"
    );
    let Outcome::Error(e) = &r.outcome else {
        panic!("an error response without an error");
    };
    assert_eq!(e.code, code);
    check_message(&Message::Response(r.clone()));
}
