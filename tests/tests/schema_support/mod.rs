//! Shared by the `schema_*` tests: where the spec data is, and JSON Schema validators built
//! from each revision's `schema.json`.
//!
//! The spec data (`shared/spec-data/<revision>/schema.json` and the 2026-07-28 examples) is
//! read at run time from `<workspace root>/../shared/spec-data`, or from `$MCP_SPEC_DATA` when
//! set. It is never copied into the repository. When it is absent, [`spec_data`] says so on
//! stderr and the test returns early (skipped), except under `CI=true`, where it fails.
// Each test binary uses a different part of this module.
#![allow(dead_code, unused_imports)]

pub(crate) mod samples;

use std::path::PathBuf;

use jsonschema::ValidatorMap;
use serde_json::Value;

/// The revisions whose `schema.json` is in the spec data.
pub(crate) const REVISIONS: [&str; 4] = ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"];

/// The spec-data folder, or `None` (after saying so) when it is absent; in CI its absence
/// fails the test instead ([`mcp_tests::spec_data_missing`]).
pub(crate) fn spec_data(test: &str) -> Option<PathBuf> {
    let dir = mcp_tests::spec_data_dir();
    if dir.join("2025-11-25").join("schema.json").is_file() {
        Some(dir)
    } else {
        mcp_tests::spec_data_missing(test, &dir);
        None
    }
}

/// Reads a JSON file.
pub(crate) fn read_json(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The compiled definitions of one revision's `schema.json`.
pub(crate) struct Revision {
    /// `2025-11-25`, …
    pub(crate) name: &'static str,
    /// `$defs` (2025-11-25 on) or `definitions` (earlier).
    defs_key: &'static str,
    /// The definition names.
    names: Vec<String>,
    validators: ValidatorMap,
}

impl Revision {
    /// Compiles every definition of `<spec data>/<name>/schema.json`.
    pub(crate) fn load(spec: &std::path::Path, name: &'static str) -> Self {
        let doc = read_json(&spec.join(name).join("schema.json"));
        let defs_key = if doc.get("$defs").is_some() {
            "$defs"
        } else {
            "definitions"
        };
        let names = doc[defs_key]
            .as_object()
            .unwrap_or_else(|| panic!("{name}: no {defs_key} object"))
            .keys()
            .cloned()
            .collect();
        let validators = jsonschema::options()
            .should_validate_formats(true)
            .build_map(&doc)
            .unwrap_or_else(|e| panic!("{name}: schema.json does not compile: {e}"));
        Self {
            name,
            defs_key,
            names,
            validators,
        }
    }

    /// The definition names.
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether the revision defines `def`.
    pub(crate) fn has(&self, def: &str) -> bool {
        self.names.iter().any(|n| n == def)
    }

    /// Validates `value` against the definition `def`: `Err` lists every violation.
    pub(crate) fn check(&self, def: &str, value: &Value) -> Result<(), String> {
        let pointer = format!("#/{}/{def}", self.defs_key);
        let validator = self
            .validators
            .get(&pointer)
            .unwrap_or_else(|| panic!("{}: no definition {def}", self.name));
        let errors: Vec<String> = validator
            .iter_errors(value)
            .map(|e| format!("at {}: {e}", e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}
