//! What `mcp_service::schema` serializes is valid under the spec's own JSON Schemas.
//!
//! Populated values of every modelled type (built in `schema_support::samples`) are
//! serialized and validated against the definition of the same name in
//! `shared/spec-data/<revision>/schema.json`: the whole set against 2025-11-25, revision-shaped
//! subsets against 2025-06-18 and 2025-03-26, and the 2026-07-28 additions against 2026-07-28.
//! A negative test proves the validator rejects broken values.

mod schema_support;

use schema_support::samples::{self, Sample};
use schema_support::{Revision, spec_data};
use serde_json::{Value, json};

/// 2025-11-25 definitions this crate does not model: the experimental tasks feature.
const NOT_MODELLED_2025_11_25: &[&str] = &[
    "CancelTaskRequest",
    "CancelTaskResult",
    "CreateTaskResult",
    "GetTaskPayloadRequest",
    "GetTaskPayloadResult",
    "GetTaskRequest",
    "GetTaskResult",
    "ListTasksRequest",
    "ListTasksResult",
    "RelatedTaskMetadata",
    "Task",
    "TaskAugmentedRequestParams",
    "TaskMetadata",
    "TaskStatus",
    "TaskStatusNotification",
    "TaskStatusNotificationParams",
];

fn validate_all(revision: &Revision, samples: &[Sample]) {
    let mut failures = Vec::new();
    for s in samples {
        assert!(
            revision.has(s.def),
            "{}: the sample names a definition the revision lacks: {}",
            revision.name,
            s.def
        );
        if let Err(e) = revision.check(s.def, &s.value) {
            failures.push(format!("{}: {e}\n  value: {}", s.def, s.value));
        }
    }
    assert!(
        failures.is_empty(),
        "{}: {} of {} samples are invalid:\n{}",
        revision.name,
        failures.len(),
        samples.len(),
        failures.join("\n")
    );
}

#[test]
fn every_modelled_type_validates_against_2025_11_25() {
    let Some(spec) = spec_data("every_modelled_type_validates_against_2025_11_25") else {
        return;
    };
    let revision = Revision::load(&spec, "2025-11-25");
    let samples = samples::rev_2025_11_25();
    validate_all(&revision, &samples);

    // The set is complete: every definition has a sample, but for the tasks feature.
    let missing: Vec<&str> = revision
        .names()
        .iter()
        .map(String::as_str)
        .filter(|name| !NOT_MODELLED_2025_11_25.contains(name))
        .filter(|name| !samples.iter().any(|s| s.def == *name))
        .collect();
    assert!(
        missing.is_empty(),
        "2025-11-25 definitions without a sample: {missing:?}"
    );
}

#[test]
fn revision_shaped_values_validate_against_2025_06_18() {
    let Some(spec) = spec_data("revision_shaped_values_validate_against_2025_06_18") else {
        return;
    };
    validate_all(
        &Revision::load(&spec, "2025-06-18"),
        &samples::rev_2025_06_18(),
    );
}

#[test]
fn revision_shaped_values_validate_against_2025_03_26() {
    let Some(spec) = spec_data("revision_shaped_values_validate_against_2025_03_26") else {
        return;
    };
    validate_all(
        &Revision::load(&spec, "2025-03-26"),
        &samples::rev_2025_03_26(),
    );
}

#[test]
fn modern_additions_validate_against_2026_07_28() {
    let Some(spec) = spec_data("modern_additions_validate_against_2026_07_28") else {
        return;
    };
    validate_all(
        &Revision::load(&spec, "2026-07-28"),
        &samples::rev_2026_07_28(),
    );
}

/// Applies `edit` to a copy of `value` and returns it.
fn broken(value: &Value, edit: impl FnOnce(&mut Value)) -> Value {
    let mut v = value.clone();
    edit(&mut v);
    v
}

#[test]
fn the_validator_rejects_broken_values() {
    let Some(spec) = spec_data("the_validator_rejects_broken_values") else {
        return;
    };
    let revision = Revision::load(&spec, "2025-11-25");
    let good = |def: &str| -> Value {
        samples::rev_2025_11_25()
            .into_iter()
            .find(|s| s.def == def)
            .unwrap_or_else(|| panic!("no sample of {def}"))
            .value
    };

    let cases: Vec<(&str, Value)> = vec![
        (
            "TextContent",
            broken(&good("TextContent"), |v| v["type"] = json!("txt")),
        ),
        (
            "Tool",
            broken(&good("Tool"), |v| {
                v.as_object_mut().map(|o| o.remove("inputSchema"));
            }),
        ),
        (
            "Tool",
            broken(&good("Tool"), |v| v["inputSchema"]["type"] = json!("array")),
        ),
        (
            "CallToolRequest",
            broken(&good("CallToolRequest"), |v| {
                v["method"] = json!("tools/cal")
            }),
        ),
        (
            "CallToolRequest",
            broken(&good("CallToolRequest"), |v| v["jsonrpc"] = json!("1.0")),
        ),
        (
            "LoggingMessageNotificationParams",
            broken(&good("LoggingMessageNotificationParams"), |v| {
                v["level"] = json!("verbose")
            }),
        ),
        (
            "ElicitResult",
            broken(&good("ElicitResult"), |v| v["action"] = json!("maybe")),
        ),
        (
            "ModelPreferences",
            broken(&good("ModelPreferences"), |v| v["costPriority"] = json!(2)),
        ),
        (
            "InitializeResult",
            broken(&good("InitializeResult"), |v| {
                v["serverInfo"].as_object_mut().map(|o| o.remove("version"));
            }),
        ),
        (
            "CallToolResult",
            broken(&good("CallToolResult"), |v| {
                v["content"][0] = json!({ "type": "text" })
            }),
        ),
        ("RequestId", json!(1.5)),
    ];
    for (def, value) in &cases {
        assert!(
            revision.check(def, value).is_err(),
            "the validator accepted a broken {def}: {value}"
        );
    }
    // The unbroken values pass, so each rejection is about the break.
    for def in [
        "TextContent",
        "Tool",
        "CallToolRequest",
        "LoggingMessageNotificationParams",
        "ElicitResult",
        "ModelPreferences",
        "InitializeResult",
        "CallToolResult",
    ] {
        revision
            .check(def, &good(def))
            .unwrap_or_else(|e| panic!("the unbroken {def} is invalid: {e}"));
    }
}
