//! Every official example of revision 2026-07-28 (`shared/spec-data/2026-07-28/examples/
//! <Type>/*.json`) deserializes into our type for `<Type>` and serializes back to an equal
//! JSON value; every member lands in a modelled field (not in an `extra` catch-all); and
//! unknown members added to an example are tolerated and kept.
//!
//! [`TABLE`] maps each example type name to our type. An example directory the table does not
//! name fails the test, listing it: nothing is skipped silently.

mod schema_support;

use std::path::{Path, PathBuf};

use mcp_service::schema::*;
use schema_support::{read_json, spec_data};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Deserializes the JSON text as `T`, then serializes it back; also returns `T`'s `Debug`.
type RoundTrip = fn(&str) -> Result<(Value, String), String>;

fn round_trip<T: Serialize + DeserializeOwned + std::fmt::Debug>(
    text: &str,
) -> Result<(Value, String), String> {
    let typed: T = serde_json::from_str(text).map_err(|e| format!("deserialize: {e}"))?;
    let value = serde_json::to_value(&typed).map_err(|e| format!("serialize: {e}"))?;
    Ok((value, format!("{typed:?}")))
}

macro_rules! table {
    ($($name:literal => $ty:ty,)*) => {
        &[$(($name, round_trip::<$ty> as RoundTrip),)*]
    };
}

/// Example type name → our type.
const TABLE: &[(&str, RoundTrip)] = table! {
    "AudioContent" => AudioContent,
    "BlobResourceContents" => BlobResourceContents,
    "BooleanSchema" => BooleanSchema,
    "CallToolRequest" => CallToolRequest,
    "CallToolRequestParams" => CallToolRequestParams,
    "CallToolResult" => CallToolResult,
    "CallToolResultResponse" => CallToolResultResponse,
    "CancelledNotification" => CancelledNotification,
    "CancelledNotificationParams" => CancelledNotificationParams,
    "ClientCapabilities" => ClientCapabilities,
    "CompleteRequest" => CompleteRequest,
    "CompleteRequestParams" => CompleteRequestParams,
    "CompleteResult" => CompleteResult,
    "CompleteResultResponse" => CompleteResultResponse,
    // In 2026-07-28 the server-to-client requests are input requests: `{method, params}`.
    "CreateMessageRequest" => CreateMessageInputRequest,
    "CreateMessageRequestParams" => CreateMessageRequestParams,
    "CreateMessageResult" => CreateMessageResult,
    "DiscoverRequest" => DiscoverRequest,
    "DiscoverResult" => DiscoverResult,
    "DiscoverResultResponse" => DiscoverResultResponse,
    "ElicitRequest" => ElicitInputRequest,
    "ElicitRequestFormParams" => ElicitRequestFormParams,
    "ElicitRequestURLParams" => ElicitRequestUrlParams,
    "ElicitResult" => ElicitResult,
    "EmbeddedResource" => EmbeddedResource,
    "GetPromptRequest" => GetPromptRequest,
    "GetPromptRequestParams" => GetPromptRequestParams,
    "GetPromptResult" => GetPromptResult,
    "GetPromptResultResponse" => GetPromptResultResponse,
    "HeaderMismatchError" => HeaderMismatchError,
    "ImageContent" => ImageContent,
    "InputRequests" => InputRequests,
    "InputRequiredResult" => InputRequiredResult,
    "InputResponses" => InputResponses,
    "InternalError" => InternalError,
    "InvalidParamsError" => InvalidParamsError,
    "ListPromptsRequest" => ListPromptsRequest,
    "ListPromptsResult" => ListPromptsResult,
    "ListPromptsResultResponse" => ListPromptsResultResponse,
    "ListResourceTemplatesRequest" => ListResourceTemplatesRequest,
    "ListResourceTemplatesResult" => ListResourceTemplatesResult,
    "ListResourceTemplatesResultResponse" => ListResourceTemplatesResultResponse,
    "ListResourcesRequest" => ListResourcesRequest,
    "ListResourcesResult" => ListResourcesResult,
    "ListResourcesResultResponse" => ListResourcesResultResponse,
    "ListRootsRequest" => ListRootsInputRequest,
    "ListRootsResult" => ListRootsResult,
    "ListToolsRequest" => ListToolsRequest,
    "ListToolsResult" => ListToolsResult,
    "ListToolsResultResponse" => ListToolsResultResponse,
    "LoggingMessageNotification" => LoggingMessageNotification,
    "LoggingMessageNotificationParams" => LoggingMessageNotificationParams,
    "MethodNotFoundError" => MethodNotFoundError,
    "MissingRequiredClientCapabilityError" => MissingRequiredClientCapabilityError,
    "ModelPreferences" => ModelPreferences,
    "NumberSchema" => NumberSchema,
    "PaginatedRequestParams" => PaginatedRequestParams,
    "ParseError" => ParseError,
    "ProgressNotification" => ProgressNotification,
    "ProgressNotificationParams" => ProgressNotificationParams,
    "PromptListChangedNotification" => PromptListChangedNotification,
    "ReadResourceRequest" => ReadResourceRequest,
    "ReadResourceResult" => ReadResourceResult,
    "ReadResourceResultResponse" => ReadResourceResultResponse,
    "Resource" => Resource,
    "ResourceLink" => ResourceLink,
    "ResourceListChangedNotification" => ResourceListChangedNotification,
    "ResourceUpdatedNotification" => ResourceUpdatedNotification,
    "ResourceUpdatedNotificationParams" => ResourceUpdatedNotificationParams,
    "Root" => Root,
    "SamplingMessage" => SamplingMessage,
    "ServerCapabilities" => ServerCapabilities,
    "StringSchema" => StringSchema,
    "SubscriptionsAcknowledgedNotification" => SubscriptionsAcknowledgedNotification,
    "SubscriptionsListenRequest" => SubscriptionsListenRequest,
    "SubscriptionsListenResult" => SubscriptionsListenResult,
    "SubscriptionsListenResultResponse" => SubscriptionsListenResultResponse,
    "TextContent" => TextContent,
    "TextResourceContents" => TextResourceContents,
    "TitledMultiSelectEnumSchema" => TitledMultiSelectEnumSchema,
    "TitledSingleSelectEnumSchema" => TitledSingleSelectEnumSchema,
    "Tool" => Tool,
    "ToolListChangedNotification" => ToolListChangedNotification,
    "ToolResultContent" => ToolResultContent,
    "ToolUseContent" => ToolUseContent,
    "UnsupportedProtocolVersionError" => UnsupportedProtocolVersionError,
    "UntitledMultiSelectEnumSchema" => UntitledMultiSelectEnumSchema,
    "UntitledSingleSelectEnumSchema" => UntitledSingleSelectEnumSchema,
};

/// Examples with members the schema does not define, which therefore land in an `extra` map
/// (and round-trip through it): the `roots/list` input request example carries an `id`.
const EXTRA_EXPECTED: &[&str] = &["ListRootsRequest/list-roots-request.json"];

/// Every example: (type name, file), sorted.
fn examples(spec: &Path) -> Vec<(String, PathBuf)> {
    let root = spec.join("2026-07-28").join("examples");
    let mut out = Vec::new();
    let dirs =
        std::fs::read_dir(&root).unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()));
    for dir in dirs.flatten() {
        if !dir.path().is_dir() {
            continue;
        }
        let name = dir.file_name().to_string_lossy().into_owned();
        for file in std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let path = file.path();
            if path.extension().is_some_and(|e| e == "json") {
                out.push((name.clone(), path));
            }
        }
    }
    out.sort();
    out
}

fn entry(name: &str) -> Option<RoundTrip> {
    TABLE.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

fn label(path: &Path) -> String {
    let parent = path
        .parent()
        .and_then(Path::file_name)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{parent}/{file}")
}

/// Whether a `Debug` rendering shows a non-empty `extra` map or an `Other(…)` catch-all.
fn has_unmodelled(debug: &str) -> bool {
    debug
        .match_indices("extra: {")
        .any(|(i, m)| !debug[i + m.len()..].starts_with('}'))
        || debug.contains("Other(")
}

#[test]
fn every_example_type_is_modelled() {
    let Some(spec) = spec_data("every_example_type_is_modelled") else {
        return;
    };
    let all = examples(&spec);
    let mut names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    names.dedup();
    let unmodelled: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| entry(n).is_none())
        .collect();
    assert!(
        unmodelled.is_empty(),
        "example types with no entry in TABLE (not modelled): {unmodelled:?}"
    );
    let stale: Vec<&str> = TABLE
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !names.contains(n))
        .collect();
    assert!(stale.is_empty(), "TABLE entries with no example: {stale:?}");
    assert_eq!(names.len(), 88, "the examples hold 88 types");
}

#[test]
fn every_example_round_trips_to_the_same_json() {
    let Some(spec) = spec_data("every_example_round_trips_to_the_same_json") else {
        return;
    };
    let all = examples(&spec);
    assert!(!all.is_empty(), "no examples found");
    let mut failures = Vec::new();
    for (name, path) in &all {
        let Some(f) = entry(name) else {
            failures.push(format!("{}: type {name} is not modelled", label(path)));
            continue;
        };
        let text = std::fs::read_to_string(path).expect("readable");
        let original = read_json(path);
        match f(&text) {
            Err(e) => failures.push(format!("{}: {e}", label(path))),
            Ok((back, _)) if back != original => failures.push(format!(
                "{}: changed on the round trip\n  original: {original}\n  back:     {back}",
                label(path)
            )),
            Ok((_, debug)) => {
                let expected = EXTRA_EXPECTED.contains(&label(path).as_str());
                if has_unmodelled(&debug) != expected {
                    failures.push(format!(
                        "{}: {} members caught by `extra`/`Other`: {debug}",
                        label(path),
                        if expected { "expected" } else { "unexpected" }
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} examples failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
    eprintln!("{} examples round-tripped", all.len());
}

/// Adds an unknown member to `object`, if it is an object.
fn add_unknown(object: &mut Value) {
    if let Some(map) = object.as_object_mut() {
        map.insert(
            "x-unknown-member".into(),
            json!({ "nested": [1, "two", { "three": null }] }),
        );
    }
}

#[test]
fn unknown_members_in_examples_are_tolerated_and_kept() {
    let Some(spec) = spec_data("unknown_members_in_examples_are_tolerated_and_kept") else {
        return;
    };
    let mut failures = Vec::new();
    let mut checked = 0;
    for (name, path) in examples(&spec) {
        let Some(f) = entry(&name) else { continue };
        // Maps keyed by the peer's own names: an extra key is an entry, not a member.
        if name == "InputRequests" || name == "InputResponses" {
            continue;
        }
        let original = read_json(&path);
        let framed = original.get("jsonrpc").is_some();
        let mut edited = original.clone();
        if framed {
            // The JSON-RPC envelope tolerates unknown members but does not keep them; what it
            // carries does.
            for key in ["params", "result", "error"] {
                if let Some(inner) = edited.get_mut(key) {
                    add_unknown(inner);
                }
            }
        } else {
            add_unknown(&mut edited);
        }
        let text = edited.to_string();
        match f(&text) {
            Err(e) => failures.push(format!("{}: {e}", label(&path))),
            Ok((back, _)) if back != edited => failures.push(format!(
                "{}: unknown member not kept\n  sent: {edited}\n  back: {back}",
                label(&path)
            )),
            Ok(_) => {}
        }
        if framed {
            let mut top = original.clone();
            add_unknown(&mut top);
            if let Err(e) = f(&top.to_string()) {
                failures.push(format!(
                    "{}: envelope member not tolerated: {e}",
                    label(&path)
                ));
            }
        }
        checked += 1;
    }
    assert!(checked > 0, "no examples checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
