//! Unit tests, one per rule; names cite the ids of `REQUIREMENTS.md` (`s_rpc_*`, `s_post_*`,
//! `g_*`).

use super::error_codes::{INVALID_REQUEST, PARSE_ERROR};
use super::*;

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).expect("test JSON is valid")
}

/// `body` for a panic message, cut to a readable length.
fn show(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.into_owned(),
    }
}

fn msg(body: &str) -> Message {
    match parse_message(body.as_bytes()) {
        Ok(m) => m,
        Err(e) => panic!("{}: expected a message, got {e}", show(body.as_bytes())),
    }
}

fn failure(body: impl AsRef<[u8]>) -> ParseFailure {
    match parse_body(body.as_ref()) {
        Ok(b) => panic!("{}: expected a failure, got {b:?}", show(body.as_ref())),
        Err(e) => e,
    }
}

fn invalid(body: impl AsRef<[u8]>) -> InvalidMessage {
    match failure(body.as_ref()) {
        ParseFailure::Invalid(e) => {
            assert_eq!(e.code(), INVALID_REQUEST);
            e
        }
        other => panic!("{}: expected -32600, got {other}", show(body.as_ref())),
    }
}

fn reason(body: impl AsRef<[u8]>) -> InvalidReason {
    invalid(body).reason()
}

fn parse_error(body: impl AsRef<[u8]>) -> DecodeError {
    match failure(body.as_ref()) {
        ParseFailure::Parse(e) => {
            assert_eq!(e.code(), PARSE_ERROR);
            e
        }
        other => panic!("{}: expected -32700, got {other}", show(body.as_ref())),
    }
}

fn request(m: Message) -> Request {
    match m {
        Message::Request(r) => r,
        other => panic!("expected a request, got {other:?}"),
    }
}

fn response(m: Message) -> Response {
    match m {
        Message::Response(r) => r,
        other => panic!("expected a response, got {other:?}"),
    }
}

fn roundtrip(m: &Message) {
    let bytes = m.to_bytes();
    assert_eq!(parse_message(&bytes).as_ref(), Ok(m), "{}", show(&bytes));
}

// --- S-RPC-1: version -----------------------------------------------------------------------

#[test]
fn s_rpc_1_request_with_version_2_0_parses() {
    let r = request(msg(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#));
    assert_eq!(r, Request::new(1, "ping", None));
}

#[test]
fn s_rpc_1_missing_jsonrpc_is_invalid_request() {
    let e = invalid(r#"{"id":1,"method":"ping"}"#);
    assert_eq!(e.reason(), InvalidReason::MissingVersion);
    assert_eq!(e.id(), Some(&RequestId::Number(1)));
    assert_eq!(e.apparent_kind(), Some(MessageKind::Request));
}

#[test]
fn s_rpc_1_wrong_version_is_invalid_request() {
    for v in [
        r#""1.0""#,
        "2.0",
        r#""2""#,
        "null",
        r#""2.0 ""#,
        r#"["2.0"]"#,
        "1e400",
    ] {
        let body = format!(r#"{{"jsonrpc":{v},"method":"ping"}}"#);
        assert_eq!(reason(&body), InvalidReason::WrongVersion, "{body}");
    }
}

#[test]
fn s_rpc_1_escaped_version_string_is_the_same_string() {
    msg(r#"{"jsonrpc":"2\u002e0","method":"ping"}"#);
}

// --- S-RPC-2: request ids -------------------------------------------------------------------

#[test]
fn s_rpc_2_null_request_id_is_invalid_request() {
    let e = invalid(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
    assert_eq!(e.reason(), InvalidReason::NullRequestId);
    assert_eq!(e.id(), None);
    assert_eq!(e.apparent_kind(), Some(MessageKind::Request));
}

#[test]
fn s_rpc_2_string_and_integer_ids_parse() {
    let cases = [
        (r#""abc""#, RequestId::from("abc")),
        (r#""""#, RequestId::from("")),
        (r#""1""#, RequestId::from("1")),
        ("0", RequestId::Number(0)),
        ("-0", RequestId::Number(0)),
        ("42", RequestId::Number(42)),
        ("-7", RequestId::Number(-7)),
        ("9223372036854775807", RequestId::Number(i64::MAX)),
        ("-9223372036854775808", RequestId::Number(i64::MIN)),
    ];
    for (text, id) in cases {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"m"}}"#);
        assert_eq!(request(msg(&body)).id, id, "{body}");
    }
}

#[test]
fn s_rpc_2_string_ids_are_unescaped() {
    let body = r#"{"jsonrpc":"2.0","id":"a\"b\\c\n\u00e9\ud83d\ude00/\/","method":"m"}"#;
    assert_eq!(request(msg(body)).id, RequestId::from("a\"b\\c\né😀//"));
}

#[test]
fn s_rpc_2_float_ids_are_invalid_request() {
    for text in [
        "1.5", "1.0", "1e3", "1E2", "-0.0", "0.1e1", "1e400", "-1e400",
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"m"}}"#);
        let e = invalid(&body);
        assert_eq!(e.reason(), InvalidReason::InvalidId, "{body}");
        assert_eq!(e.id(), None);
    }
}

#[test]
fn s_rpc_2_integers_outside_i64_are_invalid_request() {
    for text in [
        "9223372036854775808",
        "-9223372036854775809",
        "18446744073709551616",
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"m"}}"#);
        assert_eq!(reason(&body), InvalidReason::InvalidId, "{body}");
    }
}

#[test]
fn s_rpc_2_bool_array_object_ids_are_invalid_request() {
    for text in ["true", "false", "[1]", "{}", r#"{"id":1}"#] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"m"}}"#);
        assert_eq!(reason(&body), InvalidReason::InvalidId, "{body}");
    }
}

#[test]
fn s_rpc_2_lone_surrogate_in_string_id_is_parse_error() {
    parse_error(r#"{"jsonrpc":"2.0","id":"\ud800","method":"m"}"#);
}

#[test]
fn s_rpc_2_request_id_serde_follows_the_same_rules() {
    let ok = [
        ("1", RequestId::Number(1)),
        (r#""x""#, RequestId::from("x")),
    ];
    for (text, id) in ok {
        assert_eq!(
            serde_json::from_str::<RequestId>(text).ok(),
            Some(id.clone())
        );
        assert_eq!(serde_json::to_string(&id).ok().as_deref(), Some(text));
    }
    assert_eq!(
        serde_json::from_str::<RequestId>("9223372036854775807").ok(),
        Some(RequestId::Number(i64::MAX))
    );
    for text in [
        "null",
        "1.0",
        "1.5",
        "true",
        "[]",
        "{}",
        "9223372036854775808",
    ] {
        assert!(serde_json::from_str::<RequestId>(text).is_err(), "{text}");
    }
}

#[test]
fn s_rpc_2_request_id_display_is_the_wire_form() {
    assert_eq!(RequestId::Number(-3).to_string(), "-3");
    assert_eq!(RequestId::from("a\"b\n").to_string(), r#""a\"b\n""#);
}

#[test]
fn s_rpc_2_request_id_ordering_and_accessors() {
    let mut ids = [
        RequestId::from("a"),
        RequestId::Number(2),
        RequestId::Number(-1),
    ];
    ids.sort();
    assert_eq!(ids[0], RequestId::Number(-1));
    assert_eq!(ids[2].as_str(), Some("a"));
    assert_eq!(ids[1].as_number(), Some(2));
    assert_eq!(ids[2].as_number(), None);
    assert_eq!(RequestId::from(String::from("s")), RequestId::from("s"));
}

// --- S-RPC-4 / S-RPC-5: responses -----------------------------------------------------------

#[test]
fn s_rpc_4_response_carries_the_request_id() {
    let r = response(msg(r#"{"jsonrpc":"2.0","id":"r-1","result":{"ok":true}}"#));
    assert_eq!(
        r,
        Response::result(RequestId::from("r-1"), raw(r#"{"ok":true}"#))
    );
    assert!(!r.is_error());
}

#[test]
fn s_rpc_5_result_and_error_together_is_invalid_request() {
    let e = invalid(r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}"#);
    assert_eq!(e.reason(), InvalidReason::ResultAndError);
    assert_eq!(e.apparent_kind(), Some(MessageKind::Response));
    assert_eq!(e.id(), Some(&RequestId::Number(1)));
}

#[test]
fn s_rpc_5_neither_method_nor_outcome_is_invalid_request() {
    let e = invalid(r#"{"jsonrpc":"2.0","id":1}"#);
    assert_eq!(e.reason(), InvalidReason::NoMethodOrOutcome);
    assert_eq!(e.apparent_kind(), None);
    assert_eq!(
        reason(r#"{"jsonrpc":"2.0"}"#),
        InvalidReason::NoMethodOrOutcome
    );
    assert_eq!(
        reason(r#"{"jsonrpc":"2.0","id":1,"params":{}}"#),
        InvalidReason::NoMethodOrOutcome
    );
}

#[test]
fn s_rpc_5_method_with_an_outcome_is_invalid_request() {
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"m","result":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"m","error":{"code":1,"message":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":null,"result":{}}"#,
    ] {
        let e = invalid(body);
        assert_eq!(e.reason(), InvalidReason::MethodWithOutcome, "{body}");
        assert_eq!(e.apparent_kind(), None);
    }
}

#[test]
fn s_rpc_5_result_may_be_any_json_value() {
    for v in ["null", "1", r#""s""#, "[1,2]", "{}", "false"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{v}}}"#);
        let r = response(msg(&body));
        assert_eq!(r.outcome, Outcome::Result(raw(v)), "{body}");
    }
}

// --- S-RPC-6: error objects -----------------------------------------------------------------

#[test]
fn s_rpc_6_error_response_parses() {
    let r = response(msg(
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}"#,
    ));
    assert_eq!(
        r,
        Response::error(
            Some(RequestId::Number(3)),
            ErrorObject::new(error_codes::METHOD_NOT_FOUND, "Method not found")
        )
    );
    assert!(r.is_error());
}

#[test]
fn s_rpc_6_error_code_must_be_an_integer() {
    for code in [
        "1.5",
        "-32600.0",
        r#""-32600""#,
        "null",
        "1e400",
        "true",
        "9223372036854775808",
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":{code},"message":"x"}}}}"#);
        let e = invalid(&body);
        assert_eq!(e.reason(), InvalidReason::ErrorCodeNotInteger, "{body}");
        assert_eq!(e.id(), Some(&RequestId::Number(1)));
        assert_eq!(e.apparent_kind(), Some(MessageKind::Response));
    }
    assert_eq!(
        reason(r#"{"jsonrpc":"2.0","id":1,"error":{"message":"x"}}"#),
        InvalidReason::ErrorCodeNotInteger
    );
}

#[test]
fn s_rpc_6_error_message_must_be_a_string() {
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":null}}"#,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":5}}"#,
    ] {
        assert_eq!(reason(body), InvalidReason::ErrorMessageNotString, "{body}");
    }
}

#[test]
fn s_rpc_6_error_must_be_an_object() {
    for e in ["null", "1", r#""oops""#, "[]"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"error":{e}}}"#);
        assert_eq!(reason(&body), InvalidReason::ErrorNotObject, "{body}");
    }
}

#[test]
fn s_rpc_6_error_data_is_kept_raw_including_null() {
    let body = r#"{"jsonrpc":"2.0","id":1,"error":{"data": [ 1 ,{"x" :null}] ,"code":7,"message":"m","extra":1}}"#;
    let r = response(msg(body));
    let Outcome::Error(e) = &r.outcome else {
        panic!("not an error")
    };
    assert_eq!(
        e.data.as_deref().map(RawValue::get),
        Some(r#"[ 1 ,{"x" :null}]"#)
    );
    let r = response(msg(
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":7,"message":"m","data":null}}"#,
    ));
    let Outcome::Error(e) = r.outcome else {
        panic!("not an error")
    };
    assert_eq!(e.data.as_deref().map(RawValue::get), Some("null"));
}

#[test]
fn s_rpc_6_duplicate_error_members_are_invalid_request() {
    let e = invalid(r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"code":2,"message":"x"}}"#);
    assert_eq!(e.reason(), InvalidReason::DuplicateMember("error.code"));
    assert_eq!(e.id(), Some(&RequestId::Number(1)));
}

// --- S-RPC-7 / G-2: error ids ---------------------------------------------------------------

#[test]
fn g_2_error_with_null_id_parses_with_no_id() {
    let r = response(msg(
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
    ));
    assert_eq!(r.id, None);
    assert!(r.is_error());
}

#[test]
fn g_2_error_without_id_parses_with_no_id() {
    let r = response(msg(
        r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"}}"#,
    ));
    assert_eq!(r.id, None);
}

#[test]
fn s_rpc_7_error_without_id_is_encoded_without_an_id_member() {
    let r = Response::error(None, ErrorObject::new(-32000, "gone"));
    assert_eq!(
        &r.to_bytes()[..],
        br#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"gone"}}"#
    );
    roundtrip(&r.into());
}

#[test]
fn s_rpc_7_result_without_id_is_invalid_request() {
    for body in [
        r#"{"jsonrpc":"2.0","result":{}}"#,
        r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
    ] {
        let e = invalid(body);
        assert_eq!(e.reason(), InvalidReason::ResultWithoutId, "{body}");
        assert_eq!(e.apparent_kind(), Some(MessageKind::Response));
    }
}

#[test]
fn s_rpc_7_invalid_id_on_a_response_is_invalid_request() {
    assert_eq!(
        reason(r#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#),
        InvalidReason::InvalidId
    );
    assert_eq!(
        reason(r#"{"jsonrpc":"2.0","id":true,"error":{"code":1,"message":"x"}}"#),
        InvalidReason::InvalidId
    );
}

// --- S-RPC-8: notifications -----------------------------------------------------------------

#[test]
fn s_rpc_8_a_call_without_id_is_a_notification() {
    let m = msg(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(m.kind(), MessageKind::Notification);
    assert_eq!(m.id(), None);
    assert_eq!(m.method(), Some("notifications/initialized"));
    assert_eq!(
        m,
        Notification::new("notifications/initialized", None).into()
    );
}

#[test]
fn s_rpc_8_invalid_notification_reports_its_apparent_kind() {
    let e = invalid(r#"{"jsonrpc":"2.0","method":"x","params":[1]}"#);
    assert_eq!(e.apparent_kind(), Some(MessageKind::Notification));
    assert_eq!(e.id(), None);
}

// --- S-RPC-9: codes -------------------------------------------------------------------------

#[test]
fn s_rpc_9_error_codes() {
    use error_codes::*;
    assert_eq!(
        [
            PARSE_ERROR,
            INVALID_REQUEST,
            METHOD_NOT_FOUND,
            INVALID_PARAMS,
            INTERNAL_ERROR
        ],
        [-32700, -32600, -32601, -32602, -32603]
    );
    assert_eq!([SERVER_ERROR_MIN, SERVER_ERROR_MAX], [-32099, -32000]);
    assert_eq!(
        [RESOURCE_NOT_FOUND, URL_ELICITATION_REQUIRED],
        [-32002, -32042]
    );
    assert_eq!(
        [
            HEADER_MISMATCH,
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            UNSUPPORTED_PROTOCOL_VERSION
        ],
        [-32020, -32021, -32022]
    );
}

// --- S-RPC-10: params -----------------------------------------------------------------------

#[test]
fn s_rpc_10_params_array_is_invalid_request() {
    let e = invalid(r#"{"jsonrpc":"2.0","id":9,"method":"m","params":[1,2]}"#);
    assert_eq!(e.reason(), InvalidReason::ParamsNotObject);
    assert_eq!(e.id(), Some(&RequestId::Number(9)));
    assert_eq!(e.apparent_kind(), Some(MessageKind::Request));
}

#[test]
fn s_rpc_10_scalar_params_are_invalid_request() {
    for p in ["1", r#""s""#, "true"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{p}}}"#);
        assert_eq!(reason(&body), InvalidReason::ParamsNotObject, "{body}");
    }
}

#[test]
fn s_rpc_10_null_params_are_read_as_absent() {
    let r = request(msg(
        r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#,
    ));
    assert_eq!(r.params.as_deref().map(RawValue::get), None);
    assert_eq!(
        &r.to_bytes()[..],
        br#"{"jsonrpc":"2.0","id":1,"method":"m"}"#
    );
}

#[test]
fn s_rpc_10_params_are_preserved_byte_exact() {
    let params = "{ \"_meta\" : {\"progressToken\":\"t\"},\n\t\"a\":[1, 2.50, -0, 1e-7, {\"b\":null}],\"s\":\"\\u00e9\\n\\\"\\ud800\", \"\u{1F600}\":{} }";
    let body = format!(
        "{{\"params\":  {params}  ,\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"id\":\"x\"}}"
    );
    let r = request(msg(&body));
    assert_eq!(r.params.as_deref().map(RawValue::get), Some(params));
    let again = request(msg(std::str::from_utf8(&r.to_bytes()).expect("utf-8")));
    assert_eq!(again.params.as_deref().map(RawValue::get), Some(params));
}

// --- S-RPC-11 / S-POST-5 / S-POST-6 / G-8: batches ------------------------------------------

#[test]
fn s_rpc_11_batch_of_requests_and_notifications() {
    let body = br#" [ {"jsonrpc":"2.0","id":1,"method":"a"}, {"jsonrpc":"2.0","method":"b","params":{}} ] "#;
    let Ok(Body::Batch(items)) = parse_body(body) else {
        panic!("not a batch")
    };
    assert_eq!(
        items,
        vec![
            Ok(Request::new(1, "a", None).into()),
            Ok(Notification::new("b", Some(raw("{}"))).into())
        ]
    );
}

#[test]
fn s_rpc_11_batch_of_responses() {
    let body = br#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}}]"#;
    let body = parse_body(body).expect("batch");
    assert!(body.is_batch());
    let items = body.into_items();
    assert_eq!(items.len(), 2);
    assert!(items.iter().all(|i| matches!(i, Ok(Message::Response(_)))));
}

#[test]
fn s_rpc_11_empty_batch_is_invalid_request() {
    let e = invalid(" [ ] ");
    assert_eq!(e.reason(), InvalidReason::EmptyBatch);
    assert_eq!(e.id(), None);
    assert_eq!(e.apparent_kind(), None);
}

#[test]
fn s_rpc_11_invalid_elements_do_not_sink_the_batch() {
    let body = br#"[1, {"jsonrpc":"2.0","id":1,"method":"ok"}, {"jsonrpc":"2.0","id":7,"method":5}, [], "x", {"jsonrpc":"2.0","id":null,"method":"m"}]"#;
    let Ok(Body::Batch(items)) = parse_body(body) else {
        panic!("not a batch")
    };
    assert_eq!(items.len(), 6);
    assert_eq!(
        items[0].as_ref().err().map(InvalidMessage::reason),
        Some(InvalidReason::NotAnObject)
    );
    assert_eq!(items[1], Ok(Request::new(1, "ok", None).into()));
    let e = items[2].as_ref().expect_err("method 5");
    assert_eq!(e.reason(), InvalidReason::MethodNotString);
    assert_eq!(e.id(), Some(&RequestId::Number(7)));
    assert_eq!(
        &e.to_error_response().to_bytes()[..],
        br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request","data":"member `method` must be a string"}}"#
    );
    assert_eq!(
        items[3].as_ref().err().map(InvalidMessage::reason),
        Some(InvalidReason::NotAnObject)
    );
    assert_eq!(
        items[4].as_ref().err().map(InvalidMessage::reason),
        Some(InvalidReason::NotAnObject)
    );
    assert_eq!(
        items[5].as_ref().err().map(InvalidMessage::reason),
        Some(InvalidReason::NullRequestId)
    );
}

#[test]
fn s_rpc_11_syntax_error_inside_a_batch_is_a_parse_error() {
    parse_error(br#"[{"jsonrpc":"2.0","method":"a"}, {"jsonrpc":"2.0","method":"b"]"#);
    parse_error(br#"[{"jsonrpc":"2.0","method":"a"},]"#);
    parse_error(b"[{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"x\":\"\\ud800\\u\"}]");
}

#[test]
fn s_rpc_11_encode_batch_round_trips() {
    let items: Vec<Message> = vec![
        Request::new("a", "tools/list", Some(raw(r#"{"cursor":"c"}"#))).into(),
        Notification::new("notifications/progress", Some(raw(r#"{"progress":1}"#))).into(),
        Response::result(RequestId::Number(5), raw("{}")).into(),
        Response::error(None, ErrorObject::new(-32603, "boom")).into(),
    ];
    let bytes = encode_batch(&items);
    let Ok(Body::Batch(parsed)) = parse_body(&bytes) else {
        panic!("not a batch")
    };
    assert_eq!(parsed, items.into_iter().map(Ok).collect::<Vec<_>>());
    assert_eq!(&encode_batch(&[])[..], b"[]");
}

#[test]
fn s_post_6_parse_message_refuses_batches() {
    for body in [r#"[{"jsonrpc":"2.0","method":"a"}]"#, "[]", "[1]"] {
        match parse_message(body.as_bytes()) {
            Err(ParseFailure::Invalid(e)) => assert_eq!(e.reason(), InvalidReason::BatchNotAllowed),
            other => panic!("{body}: {other:?}"),
        }
    }
    assert_eq!(
        parse_message(b"[{]").map_err(|e| e.code()),
        Err(PARSE_ERROR)
    );
    // parse_message does not look inside arrays: what is wrong in an element does not matter.
    let body = br#"[{"\ud800":1}]"#;
    assert_eq!(failure(body).code(), PARSE_ERROR);
    assert!(matches!(
        parse_message(body),
        Err(ParseFailure::Invalid(e)) if e.reason() == InvalidReason::BatchNotAllowed
    ));
}

// --- S-RPC-12: kinds and accessors ----------------------------------------------------------

#[test]
fn s_rpc_12_kind_id_method_params_accessors() {
    let req = msg(r#"{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"x"}}"#);
    assert_eq!(req.kind(), MessageKind::Request);
    assert_eq!(req.id(), Some(&RequestId::from("q")));
    assert_eq!(req.method(), Some("tools/call"));
    assert_eq!(req.params().map(RawValue::get), Some(r#"{"name":"x"}"#));
    let res = msg(r#"{"jsonrpc":"2.0","id":"q","result":{}}"#);
    assert_eq!(res.kind(), MessageKind::Response);
    assert_eq!(res.id(), Some(&RequestId::from("q")));
    assert_eq!(res.method(), None);
    assert_eq!(res.params().map(RawValue::get), None);
    let err = msg(r#"{"jsonrpc":"2.0","error":{"code":1,"message":""}}"#);
    assert_eq!(err.id(), None);
    let body = parse_body(br#"{"jsonrpc":"2.0","method":"n"}"#).expect("message");
    assert!(!body.is_batch());
    assert_eq!(
        body.into_items(),
        vec![Ok(Notification::new("n", None).into())]
    );
}

// --- -32700 vs -32600 -----------------------------------------------------------------------

#[test]
fn parse_error_for_text_that_is_not_json() {
    for body in [
        "",
        "   ",
        "{",
        "abc",
        r#"{"a":}"#,
        r#"{"jsonrpc":"2.0",}"#,
        "{'a':1}",
        "nul",
        r#""abc"#,
        "01",
        "[1,]",
        r#"{"a":"\x"}"#,
    ] {
        let e = parse_error(body);
        assert!(!e.detail().is_empty());
        assert_eq!(failure(body).id(), None);
    }
}

#[test]
fn parse_error_for_raw_control_characters_in_strings() {
    parse_error("{\"jsonrpc\":\"2.0\",\"method\":\"a\nb\"}");
    parse_error("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"k\":\"\t\"}}");
}

#[test]
fn parse_error_for_trailing_garbage() {
    let m = r#"{"jsonrpc":"2.0","method":"a"}"#;
    for body in [
        format!("{m} x"),
        format!("{m}{m}"),
        format!("{m},"),
        format!("{m}\0"),
    ] {
        parse_error(&body);
    }
    msg(&format!(" \r\n\t{m} \r\n\t"));
}

#[test]
fn s_post_4_invalid_utf8_is_a_parse_error_anywhere() {
    let bodies: [&[u8]; 4] = [
        b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"k\":\"\xc3\x28\"}}",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"unknown\":\"\xed\xa0\x80\"}",
        b"\xff",
    ];
    for body in bodies {
        assert!(parse_error(body).detail().contains("UTF-8"));
    }
}

#[test]
fn s_post_4_one_leading_byte_order_mark_is_skipped() {
    let m =
        parse_message(b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"method\":\"a\"}").expect("BOM skipped");
    assert_eq!(m.method(), Some("a"));
    parse_error(b"\xef\xbb\xbf\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"method\":\"a\"}");
}

#[test]
fn top_level_scalars_are_invalid_request() {
    for body in ["1", r#""x""#, "null", "true", "1e400", "-0.5"] {
        let e = invalid(body);
        assert_eq!(e.reason(), InvalidReason::NotAnObject, "{body}");
        assert_eq!(e.apparent_kind(), None);
    }
}

#[test]
fn lone_surrogates_fail_only_where_the_envelope_decodes() {
    // In a payload: forwarded untouched.
    let body = r#"{"jsonrpc":"2.0","method":"m","params":{"s":"\udc00"}}"#;
    let m = msg(body);
    assert_eq!(m.params().map(RawValue::get), Some(r#"{"s":"\udc00"}"#));
    roundtrip(&m);
    // In an unknown member: skipped.
    msg(r#"{"jsonrpc":"2.0","method":"m","x":"\ud800"}"#);
    // In a member name, the method, the version, the error message: -32700.
    parse_error(r#"{"jsonrpc":"2.0","method":"m","\ud800":1}"#);
    parse_error(r#"{"jsonrpc":"2.0","method":"\ud800"}"#);
    parse_error(r#"{"jsonrpc":"\ud800","method":"m"}"#);
    parse_error(r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"\udfff"}}"#);
}

// --- unknown and duplicate members ----------------------------------------------------------

#[test]
fn unknown_members_are_tolerated_and_dropped() {
    let body =
        r#"{"jsonrpc":"2.0","x":{"deep":[1,{"a":null}]},"id":1,"method":"m","x":2,"Method":"M"}"#;
    let m = msg(body);
    assert_eq!(m, Request::new(1, "m", None).into());
    assert_eq!(
        &m.to_bytes()[..],
        br#"{"jsonrpc":"2.0","id":1,"method":"m"}"#
    );
}

#[test]
fn escaped_member_names_are_recognized() {
    let m = msg(r#"{"\u006asonrpc":"2.0","\u0069d":2,"me\u0074hod":"m"}"#);
    assert_eq!(m, Request::new(2, "m", None).into());
}

#[test]
fn duplicate_envelope_members_are_invalid_request() {
    let cases = [
        (
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"m"}"#,
            "jsonrpc",
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"m","method":"n"}"#,
            "method",
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{},"params":{}}"#,
            "params",
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#,
            "result",
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","error":{"code":1,"message":""},"error":{"code":1,"message":""}}"#,
            "error",
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#,
            "id",
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"id":1,"method":"m"}"#,
            "id",
            false,
        ),
    ];
    for (body, member, id_echoed) in cases {
        let e = invalid(body);
        assert_eq!(e.reason(), InvalidReason::DuplicateMember(member), "{body}");
        assert_eq!(e.id().is_some(), id_echoed, "{body}");
    }
}

// --- nesting: no recursion, no stack overflow -----------------------------------------------

const DEEP: usize = 100_000;

#[test]
fn deep_nesting_inside_params_is_forwarded_without_recursion() {
    let nested = format!("{}{}", "[".repeat(DEEP), "]".repeat(DEEP));
    let params = format!(r#"{{"a":{nested}}}"#);
    let body = format!(r#"{{"jsonrpc":"2.0","method":"m","params":{params}}}"#);
    let m = msg(&body);
    assert_eq!(m.params().map(RawValue::get), Some(params.as_str()));
    roundtrip(&m);
    // The typed layer that deserializes the payload later is protected by serde_json's
    // recursion limit (128): it reports an error instead of overflowing the stack.
    let typed = serde_json::from_str::<serde_json::Value>(&params);
    assert!(typed.is_err_and(|e| e.to_string().contains("recursion limit")));
}

#[test]
fn deep_nesting_in_unknown_members_and_ids_is_handled() {
    let nested = format!("{}0{}", "{\"a\":".repeat(DEEP), "}".repeat(DEEP));
    msg(&format!(r#"{{"jsonrpc":"2.0","method":"m","x":{nested}}}"#));
    let body = format!(r#"{{"jsonrpc":"2.0","method":"m","id":{nested}}}"#);
    assert_eq!(reason(&body), InvalidReason::InvalidId);
}

#[test]
fn deep_nesting_at_the_top_is_an_invalid_element() {
    let body = format!("{}{}", "[".repeat(DEEP), "]".repeat(DEEP));
    let Ok(Body::Batch(items)) = parse_body(body.as_bytes()) else {
        panic!("not a batch")
    };
    assert_eq!(items.len(), 1);
    assert_eq!(
        items[0].as_ref().err().map(InvalidMessage::reason),
        Some(InvalidReason::NotAnObject)
    );
}

#[test]
fn deep_unterminated_nesting_is_a_parse_error() {
    parse_error("[".repeat(DEEP));
    parse_error(format!(
        r#"{{"jsonrpc":"2.0","method":"m","params":{}"#,
        "{\"a\":".repeat(DEEP)
    ));
}

// --- encoding -------------------------------------------------------------------------------

#[test]
fn encoding_is_compact_and_ordered() {
    let req: Message = Request::new(1, "tools/call", Some(raw(r#"{"name":"t"}"#))).into();
    assert_eq!(
        &req.to_bytes()[..],
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#
    );
    let note = Notification::new("notifications/cancelled", None);
    assert_eq!(
        &note.to_bytes()[..],
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#
    );
    let res = Response::result(RequestId::from("s"), raw("{}"));
    assert_eq!(
        &res.to_bytes()[..],
        br#"{"jsonrpc":"2.0","id":"s","result":{}}"#
    );
    let err = Response::error(
        Some(RequestId::Number(i64::MIN)),
        ErrorObject::new(-32602, "bad").with_data(raw(r#"{"supported":["2025-11-25"]}"#)),
    );
    assert_eq!(
        &err.to_bytes()[..],
        br#"{"jsonrpc":"2.0","id":-9223372036854775808,"error":{"code":-32602,"message":"bad","data":{"supported":["2025-11-25"]}}}"#
    );
    let mut out = b"x".to_vec();
    req.write_to(&mut out);
    assert_eq!(&out[1..], &req.to_bytes()[..]);
}

#[test]
fn encoding_escapes_strings_minimally() {
    let all_controls: String = (0u8..0x20).map(char::from).collect();
    let method = format!("a\"b\\c/\u{7f}é😀\u{2028}{all_controls}");
    let m: Message = Request::new(method.as_str(), method.as_str(), None).into();
    let bytes = m.to_bytes();
    let text = std::str::from_utf8(&bytes).expect("utf-8");
    assert!(text.contains(r#"a\"b\\c/"#));
    assert!(text.contains("\u{7f}é😀\u{2028}"));
    assert!(text.contains(r#"\u0000\u0001"#));
    assert!(text.contains(r#"\b\t\n\u000b\f\r"#));
    assert!(text.contains(r#"\u001f"#));
    assert!(!text.bytes().any(|b| b < 0x20));
    roundtrip(&m);
}

#[test]
fn every_parsed_kind_round_trips() {
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}"#,
        r#"{"jsonrpc":"2.0","id":"é","method":"","params":{}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":-1,"result":null}"#,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":"x"}}"#,
        r#"{"jsonrpc":"2.0","error":{"code":0,"message":"\u0000"}}"#,
    ] {
        roundtrip(&msg(body));
    }
}

// --- ParseFailure ---------------------------------------------------------------------------

#[test]
fn parse_failure_builds_its_error_response() {
    let f = failure("{");
    assert_eq!(f.code(), PARSE_ERROR);
    assert_eq!(f.status_hint(), http::StatusCode::BAD_REQUEST);
    assert_eq!(f.apparent_kind(), None);
    let r = f.to_error_response();
    assert_eq!(r.id, None);
    let Outcome::Error(e) = &r.outcome else {
        panic!("not an error")
    };
    assert_eq!((e.code, &*e.message), (PARSE_ERROR, "Parse error"));
    assert!(
        e.data
            .as_deref()
            .is_some_and(|d| d.get().starts_with("\"EOF"))
    );
    roundtrip(&r.into());

    let f = failure(r#"{"jsonrpc":"1.0","id":"q","method":"m"}"#);
    assert_eq!(f.code(), INVALID_REQUEST);
    assert_eq!(f.id(), Some(&RequestId::from("q")));
    assert_eq!(f.apparent_kind(), Some(MessageKind::Request));
    assert_eq!(
        &f.to_error_response().to_bytes()[..],
        br#"{"jsonrpc":"2.0","id":"q","error":{"code":-32600,"message":"Invalid Request","data":"member `jsonrpc` must be \"2.0\""}}"#
    );
    assert!(f.to_string().contains("jsonrpc"));
}

#[test]
fn every_invalid_reason_has_a_message() {
    let reasons = [
        InvalidReason::NotAnObject,
        InvalidReason::EmptyBatch,
        InvalidReason::BatchNotAllowed,
        InvalidReason::DuplicateMember("id"),
        InvalidReason::MissingVersion,
        InvalidReason::WrongVersion,
        InvalidReason::MethodNotString,
        InvalidReason::NullRequestId,
        InvalidReason::InvalidId,
        InvalidReason::ParamsNotObject,
        InvalidReason::MethodWithOutcome,
        InvalidReason::ResultAndError,
        InvalidReason::NoMethodOrOutcome,
        InvalidReason::ResultWithoutId,
        InvalidReason::ErrorNotObject,
        InvalidReason::ErrorCodeNotInteger,
        InvalidReason::ErrorMessageNotString,
    ];
    for r in reasons {
        assert!(!r.to_string().is_empty());
    }
}

#[test]
fn method_must_be_a_string() {
    for v in ["5", "null", "[]", "{}", "true"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":{v}}}"#);
        assert_eq!(reason(&body), InvalidReason::MethodNotString, "{body}");
    }
}

#[test]
fn error_object_envelope_drops_unknown_members_and_serde_keeps_them() {
    let body = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m","data": [1, 2],"x":{"y":true}}}"#;
    let Outcome::Error(e) = response(msg(body)).outcome else {
        panic!("expected an error outcome");
    };
    assert!(e.extra.is_empty());
    assert_eq!(e.data.as_deref().map(RawValue::get), Some("[1, 2]"));
    assert_eq!(
        e.data_as::<Vec<u8>>().map(Result::ok),
        Some(Some(vec![1, 2]))
    );

    let object = r#"{"code":-1,"message":"m","data": [1, 2],"x":{"y":true}}"#;
    let e: ErrorObject = serde_json::from_str(object).expect("an error object");
    assert_eq!(e.data.as_deref().map(RawValue::get), Some("[1, 2]"));
    assert_eq!(e.extra["x"], serde_json::json!({ "y": true }));
    assert_eq!(
        serde_json::to_string(&e).expect("serializes"),
        r#"{"code":-1,"message":"m","data":[1, 2],"x":{"y":true}}"#
    );
    assert!(serde_json::from_str::<ErrorObject>(r#"{"code":1,"code":2,"message":""}"#).is_err());
    assert!(serde_json::from_str::<ErrorObject>(r#"{"message":""}"#).is_err());

    // The encoder writes `extra` after `data`.
    let r = Response::error(None, e.clone());
    assert_eq!(
        &r.to_bytes()[..],
        br#"{"jsonrpc":"2.0","error":{"code":-1,"message":"m","data":[1, 2],"x":{"y":true}}}"#
    );
    let mut other = e.clone();
    assert_eq!(other, e);
    other.extra.clear();
    assert_ne!(other, e);
    other = e.clone();
    other.data = Some(raw("[1,2]"));
    assert_ne!(other, e);
}

#[test]
fn a_member_that_may_be_there_is_never_missed() {
    let no = |s: &str| assert!(!may_have_member(s, "_meta"), "{s}");
    let maybe = |s: &str| assert!(may_have_member(s, "_meta"), "{s}");
    no(r#"{"name":"echo","arguments":{"text":"hi"}}"#);
    no(r#"{"text":"x_metay","_metax":1}"#);
    maybe(r#"{"_meta":{}}"#);
    maybe(r#"{"a":{"b":[{"_meta":1}]}}"#);
    // A key spelled with an escape: only a parse can tell.
    maybe(r#"{"\u005fmeta":{"progressToken":1}}"#);
}

proptest::proptest! {
    /// Whatever the keys (escapes included, as serde writes them), an object whose parse has
    /// `_meta` is never said to lack it.
    #[test]
    fn may_have_member_agrees_with_a_parse(
        keys in proptest::collection::vec("(_meta|_met|meta|\"|\\\\|a|\n|_){0,6}", 0..5),
    ) {
        let object: serde_json::Map<String, serde_json::Value> =
            keys.into_iter().map(|k| (k, serde_json::Value::Null)).collect();
        let text = serde_json::to_string(&object).unwrap();
        let has = object.contains_key("_meta");
        proptest::prop_assert!(!has || may_have_member(&text, "_meta"), "{}", text);
    }
}
