//! The official JSON examples of MCP 2026-07-28 (`../shared/spec-data/2026-07-28/examples`)
//! through the envelope parser: every example that is a whole JSON-RPC message parses as the
//! kind its type name says and round-trips; every other example (bare params, results, error
//! objects, MRTR input requests) is JSON but not a message (`-32600`). Skipped, saying so,
//! when the folder is absent (`$MCP_SPEC_DATA` names another), except under `CI=true`, where
//! that fails.

use mcp_proto::jsonrpc::{Message, MessageKind, Outcome, error_codes, parse_message};

#[test]
fn spec_examples_2026_07_28_parse_as_their_kind() {
    let dir = mcp_tests::spec_data_dir()
        .join("2026-07-28")
        .join("examples");
    let Ok(types) = std::fs::read_dir(&dir) else {
        mcp_tests::spec_data_missing("spec_examples_2026_07_28_parse_as_their_kind", &dir);
        return;
    };
    let (mut messages, mut others) = (0, 0);
    for ty in types.flatten() {
        let type_name = ty.file_name().to_string_lossy().into_owned();
        let Ok(files) = std::fs::read_dir(ty.path()) else {
            continue;
        };
        for file in files.flatten() {
            let Ok(bytes) = std::fs::read(file.path()) else {
                continue;
            };
            let name = file.path().display().to_string();
            let is_message = String::from_utf8_lossy(&bytes).contains("\"jsonrpc\"");
            match parse_message(&bytes) {
                Ok(m) if is_message => {
                    check(&type_name, &m, &name);
                    assert_eq!(parse_message(&m.to_bytes()).as_ref(), Ok(&m), "{name}");
                    messages += 1;
                }
                Err(f) if !is_message => {
                    assert_eq!(f.code(), error_codes::INVALID_REQUEST, "{name}: {f}");
                    others += 1;
                }
                other => panic!("{name}: unexpected {other:?}"),
            }
        }
    }
    assert!(messages >= 30, "only {messages} message examples found");
    assert!(others > 0);
}

fn check(type_name: &str, m: &Message, name: &str) {
    let expected = if type_name.ends_with("Request") {
        MessageKind::Request
    } else if type_name.ends_with("Notification") {
        MessageKind::Notification
    } else {
        MessageKind::Response
    };
    assert_eq!(m.kind(), expected, "{name}");
    let code = match m {
        Message::Response(r) => match &r.outcome {
            Outcome::Error(e) => Some(e.code),
            Outcome::Result(_) => None,
        },
        _ => None,
    };
    let expected_code = match type_name {
        "HeaderMismatchError" => Some(error_codes::HEADER_MISMATCH),
        "MissingRequiredClientCapabilityError" => {
            Some(error_codes::MISSING_REQUIRED_CLIENT_CAPABILITY)
        }
        "UnsupportedProtocolVersionError" => Some(error_codes::UNSUPPORTED_PROTOCOL_VERSION),
        _ => None,
    };
    assert_eq!(code, expected_code, "{name}");
}
