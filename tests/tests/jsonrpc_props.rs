//! Properties of `mcp_proto::jsonrpc`: encode/parse round trips for arbitrary messages
//! (S-RPC-1..12), byte-exact payloads, member order and whitespace independence, and no panic
//! on arbitrary input, whose failures are always `-32700` or `-32600`.

use mcp_proto::fuzzing::jsonrpc::jsonrpc_parse;
use mcp_proto::jsonrpc::{
    Body, ErrorObject, Message, Notification, Outcome, RawValue, Request, RequestId, Response,
    encode_batch, error_codes, parse_body, parse_message,
};
use proptest::prelude::*;

// --- JSON text generators -------------------------------------------------------------------

/// JSON whitespace, possibly empty.
fn ws() -> impl Strategy<Value = String> {
    "[ \t\r\n]{0,2}"
}

/// A JSON string literal with a mix of plain characters (any Unicode) and escapes, including
/// a surrogate pair and a lone surrogate (legal JSON grammar, kept verbatim in payloads).
fn json_string() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => any::<char>()
            .prop_filter("needs an escape", |c| !matches!(c, '"' | '\\' | '\0'..='\x1f'))
            .prop_map(String::from),
        1 => prop::sample::select(vec![
            r#"\n"#, r#"\""#, r#"\\"#, r#"\/"#, r#"\u00e9"#, r#"\ud83d\ude00"#, r#"\u0000"#,
            r#"\b"#, r#"\t"#, r#"\ud800"#, r#"\uDFFF"#,
        ])
        .prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..8).prop_map(|pieces| format!("\"{}\"", pieces.concat()))
}

/// A JSON number as text.
fn json_number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:?}")),
        Just("1e400".to_owned()),
        Just("-0".to_owned()),
        Just("18446744073709551616".to_owned()),
    ]
}

/// Any JSON value as text, with whitespace only *inside* containers (the parser keeps a
/// payload from its first to its last byte).
fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        json_number(),
        json_string(),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec((ws(), inner.clone(), ws()), 0..5).prop_map(|items| {
                let items: Vec<String> = items.into_iter().map(|(a, v, b)| a + &v + &b).collect();
                format!("[{}]", items.join(","))
            }),
            object_of(inner),
        ]
    })
}

/// A JSON object whose member values come from `value`.
fn object_of(value: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    prop::collection::vec((ws(), json_string(), ws(), ws(), value, ws()), 0..5).prop_map(
        |members| {
            let members: Vec<String> = members
                .into_iter()
                .map(|(a, k, b, c, v, d)| format!("{a}{k}{b}:{c}{v}{d}"))
                .collect();
            format!("{{{}}}", members.join(","))
        },
    )
}

fn json_object() -> impl Strategy<Value = String> {
    object_of(json_value())
}

fn raw(text: String) -> Box<RawValue> {
    RawValue::from_string(text).expect("generated JSON is valid")
}

// --- message generators ---------------------------------------------------------------------

fn request_id() -> impl Strategy<Value = RequestId> {
    prop_oneof![
        any::<i64>().prop_map(RequestId::Number),
        any::<String>().prop_map(RequestId::from),
        prop::sample::select(vec!["", "1", "null", "a\"b", "\u{0}"]).prop_map(RequestId::from),
    ]
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "initialize",
            "tools/call",
            "notifications/initialized",
            "notifications/cancelled",
            "",
        ])
        .prop_map(String::from),
        any::<String>(),
    ]
}

fn error_object() -> impl Strategy<Value = ErrorObject> {
    (
        prop_oneof![
            any::<i64>(),
            Just(error_codes::PARSE_ERROR),
            Just(error_codes::INVALID_REQUEST)
        ],
        any::<String>(),
        prop::option::of(json_value()),
    )
        .prop_map(|(code, message, data)| ErrorObject {
            code,
            message,
            data: data.map(raw),
            extra: Default::default(),
        })
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (request_id(), method(), prop::option::of(json_object()))
            .prop_map(|(id, m, p)| Request::new(id, m, p.map(raw)).into()),
        (method(), prop::option::of(json_object())).prop_map(|(m, p)| Notification::new(
            m,
            p.map(raw)
        )
        .into()),
        (request_id(), json_value()).prop_map(|(id, r)| Response::result(id, raw(r)).into()),
        (prop::option::of(request_id()), error_object())
            .prop_map(|(id, e)| Response::error(id, e).into()),
    ]
}

/// The members of `m` as (name, JSON text) pairs, written independently of `to_bytes`
/// (strings through `RequestId`'s `Display`, which is the JSON form).
fn members(m: &Message) -> Vec<(&'static str, String)> {
    let json_str = |s: &str| RequestId::from(s).to_string();
    let mut out = vec![("jsonrpc", "\"2.0\"".to_owned())];
    match m {
        Message::Request(r) => {
            out.push(("id", r.id.to_string()));
            out.push(("method", json_str(&r.method)));
            out.extend(r.params.as_ref().map(|p| ("params", p.get().to_owned())));
        }
        Message::Notification(n) => {
            out.push(("method", json_str(&n.method)));
            out.extend(n.params.as_ref().map(|p| ("params", p.get().to_owned())));
        }
        Message::Response(r) => {
            out.extend(r.id.as_ref().map(|id| ("id", id.to_string())));
            match &r.outcome {
                Outcome::Result(v) => out.push(("result", v.get().to_owned())),
                Outcome::Error(e) => {
                    let mut obj = format!(
                        r#"{{ "message" : {}, "code":{}"#,
                        json_str(&e.message),
                        e.code
                    );
                    if let Some(d) = &e.data {
                        obj += &format!(r#","data": {}"#, d.get());
                    }
                    out.push(("error", obj + " }"));
                }
            }
        }
    }
    out
}

/// Tokens that make up JSON-RPC bodies, for a structure-aware "token soup".
const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    " ",
    "\"jsonrpc\"",
    "\"2.0\"",
    "\"id\"",
    "\"method\"",
    "\"params\"",
    "\"result\"",
    "\"error\"",
    "\"code\"",
    "\"message\"",
    "\"data\"",
    "1",
    "-1",
    "1.5",
    "1e400",
    "null",
    "true",
    "\"x\"",
    "{}",
    "[]",
    "\"\\ud800\"",
    "\u{feff}",
    "\n",
];

fn assert_code_is_parse_or_invalid(data: &[u8]) -> Result<(), TestCaseError> {
    if let Err(f) = parse_body(data) {
        prop_assert!(
            f.code() == error_codes::PARSE_ERROR || f.code() == error_codes::INVALID_REQUEST,
            "unexpected code {}",
            f.code()
        );
    }
    Ok(())
}

proptest! {
    #[test]
    fn every_message_round_trips_through_to_bytes(m in message()) {
        let bytes = m.to_bytes();
        prop_assert_eq!(parse_body(&bytes), Ok(Body::Single(m.clone())));
        prop_assert_eq!(parse_message(&bytes), Ok(m));
    }

    #[test]
    fn every_batch_round_trips_through_encode_batch(ms in prop::collection::vec(message(), 1..6)) {
        let bytes = encode_batch(&ms);
        prop_assert_eq!(parse_body(&bytes), Ok(Body::Batch(ms.into_iter().map(Ok).collect())));
    }

    #[test]
    fn member_order_and_whitespace_do_not_matter(
        (m, order) in message().prop_flat_map(|m| {
            let n = members(&m).len();
            (Just(m), Just((0..n).collect::<Vec<_>>()).prop_shuffle())
        }),
        pads in prop::collection::vec(ws(), 16),
    ) {
        let members = members(&m);
        let text: Vec<String> = order
            .iter()
            .enumerate()
            .map(|(i, &j)| format!("{}\"{}\"{}:{}{}", pads[i], members[j].0, pads[i + 4], pads[i + 8], members[j].1))
            .collect();
        let body = format!("{}{{{}}}{}", pads[12], text.join(","), pads[13]);
        prop_assert_eq!(parse_message(body.as_bytes()), Ok(m));
    }

    #[test]
    fn params_are_preserved_byte_exact(params in json_object(), a in ws(), b in ws()) {
        let body = format!(r#"{{"jsonrpc":"2.0","method":"m","params":{a}{params}{b}}}"#);
        let m = parse_message(body.as_bytes());
        prop_assert_eq!(m.as_ref().ok().and_then(Message::params).map(RawValue::get), Some(params.as_str()));
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..256)) {
        assert_code_is_parse_or_invalid(&data)?;
        jsonrpc_parse(&data);
    }

    #[test]
    fn token_soup_never_panics(tokens in prop::collection::vec(prop::sample::select(TOKENS), 0..40)) {
        let data = tokens.concat();
        assert_code_is_parse_or_invalid(data.as_bytes())?;
        jsonrpc_parse(data.as_bytes());
    }

    #[test]
    fn mutated_messages_never_panic(
        m in message(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..4),
    ) {
        let mut data = m.to_bytes().to_vec();
        for (at, byte, op) in edits {
            let i = at.index(data.len() + 1);
            match op {
                0 => data.insert(i, byte),
                1 if i < data.len() => { data.remove(i); }
                _ if i < data.len() => data[i] = byte,
                _ => data.push(byte),
            }
        }
        assert_code_is_parse_or_invalid(&data)?;
        jsonrpc_parse(&data);
    }
}
