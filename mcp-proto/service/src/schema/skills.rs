//! The Skills extension (SEP-2640, `io.modelcontextprotocol/skills`): skill entries,
//! `skills/list`, `skills/get`, `resources/directory/read`, and the extension's settings.
//!
//! A skill is a directory of files (at least a `SKILL.md` with YAML frontmatter) served as
//! resources, conventionally at `skill://<skill-path>/<file-path>`. A [`SkillEntry`] names
//! the skill's `SKILL.md`, carries its frontmatter verbatim (as JSON) and lists every file
//! with its SHA-256 digest and size, which is what a client verifies what it reads against.

use serde::{Deserialize, Serialize};

use super::tags::DynamicTag;
use super::{CacheScope, Cursor, JsonObject, Meta, Resource, ResultType, ServerCapabilities};

/// The identifier of the Skills extension, the key of its settings under
/// `capabilities.extensions`.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";

/// The MIME type of a directory resource (a skill's root and each of its subdirectories), as
/// `resources/directory/read` lists them.
pub const DIRECTORY_MIME_TYPE: &str = "inode/directory";

/// The file every skill has at its root; its resource URI is the skill's URI.
pub const SKILL_MD: &str = "SKILL.md";

/// The settings of the Skills extension, declared inline as the value of
/// `capabilities.extensions["io.modelcontextprotocol/skills"]`. An empty object declares the
/// extension (and so `skills/list` and `skills/get`) with no optional feature.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillsCapability {
    /// The server implements `resources/directory/read` (absent: `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory_read: Option<bool>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl SkillsCapability {
    /// The extension's settings as a server declared them in `capabilities`; `None` when it
    /// did not declare the extension, or declared it with something other than an object.
    pub fn of(capabilities: &ServerCapabilities) -> Option<SkillsCapability> {
        let settings = capabilities.extensions.as_ref()?.get(SKILLS_EXTENSION)?;
        serde_json::from_value(serde_json::Value::Object(settings.clone())).ok()
    }

    /// Whether `resources/directory/read` is declared.
    pub fn directory_read(&self) -> bool {
        self.directory_read == Some(true)
    }

    /// The settings as the JSON object that goes under `capabilities.extensions`.
    pub fn to_object(&self) -> JsonObject {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => JsonObject::new(),
        }
    }
}

/// One file of a skill, as a [`SkillEntry`] lists it: where to read it, and what the bytes
/// read there must be.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SkillResource {
    /// The resource URI of the file.
    pub uri: String,
    /// The SHA-256 of the file's raw bytes: `sha256:` and 64 lowercase hexadecimal digits.
    pub digest: String,
    /// The length of the file's raw bytes (the bytes the digest covers).
    pub size: u64,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The files of a skill: a complete list with digests, or `"dynamic"` for a skill generated
/// on demand, whose content cannot be digested in advance (and cannot be verified).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SkillResources {
    /// Every file of the skill, `SKILL.md` included, each once.
    Files(Vec<SkillResource>),
    /// `"dynamic"`: no file manifest.
    Dynamic(DynamicTag),
}

/// A skill as `skills/list` and `skills/get` describe it (a skill entry).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SkillEntry {
    /// The resource URI of the skill's `SKILL.md`; its last path segment before `SKILL.md`
    /// is the skill's name.
    pub uri: String,
    /// The `SKILL.md` YAML frontmatter, verbatim, as a JSON object (`name` and `description`
    /// at least).
    pub frontmatter: JsonObject,
    /// The skill's files; `None` when the server sent none (a skill generated on demand, in
    /// revisions of the extension that omit the member).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<SkillResources>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl SkillEntry {
    /// The frontmatter's `name`, when it is a string.
    pub fn name(&self) -> Option<&str> {
        self.frontmatter
            .get("name")
            .and_then(serde_json::Value::as_str)
    }

    /// The frontmatter's `description`, when it is a string.
    pub fn description(&self) -> Option<&str> {
        self.frontmatter
            .get("description")
            .and_then(serde_json::Value::as_str)
    }

    /// The listed files; `None` for a skill without a file manifest.
    pub fn files(&self) -> Option<&[SkillResource]> {
        match &self.resources {
            Some(SkillResources::Files(files)) => Some(files),
            _ => None,
        }
    }

    /// The skill's root directory: its URI without the final `/SKILL.md` (no trailing
    /// slash); `None` when the URI does not end in `/SKILL.md`.
    pub fn root(&self) -> Option<&str> {
        self.uri
            .strip_suffix(SKILL_MD)
            .and_then(|u| u.strip_suffix('/'))
    }
}

/// The result of `skills/list`: one page of skill entries (an entry is never split across
/// pages).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSkillsResult {
    /// How to read the result (2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// This page of skills (possibly empty, or partial: not proof the server has no other).
    pub skills: Vec<SkillEntry>,
    /// Where the next page starts; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Cursor>,
    /// How long the client may cache this result, in milliseconds (2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Who may cache this result (2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The params of `skills/get`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GetSkillRequestParams {
    /// The URI of the skill's `SKILL.md`.
    pub uri: String,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The result of `skills/get`: the skill's entry, as `skills/list` would list it (never a
/// cursor: a single entry is not a list).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetSkillResult {
    /// How to read the result (2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// The skill's entry.
    pub skill: SkillEntry,
    /// How long the client may cache this result, in milliseconds (2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Who may cache this result (2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The params of `resources/directory/read`: a directory resource, and where to continue.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ReadDirectoryRequestParams {
    /// The URI of the directory (no trailing slash).
    pub uri: String,
    /// Where to continue: the `nextCursor` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The result of `resources/directory/read`: the directory's direct children, files with
/// their resource metadata and subdirectories with [`DIRECTORY_MIME_TYPE`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadDirectoryResult {
    /// How to read the result (2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// This page of children.
    pub resources: Vec<Resource>,
    /// Where the next page starts; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Cursor>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not model, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Read, written back: the same JSON value.
    fn round_trip<T: Serialize + serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
        let typed: T = serde_json::from_value(value.clone()).expect("reads");
        assert_eq!(serde_json::to_value(&typed).expect("writes"), value);
        typed
    }

    #[test]
    fn list_and_get_results_round_trip() {
        let entry = json!({
            "uri": "skill://acme/billing/refunds/SKILL.md",
            "frontmatter": {
                "name": "refunds",
                "description": "Process customer refund requests",
                "license": "Apache-2.0",
                "metadata": {"version": "2.1.0"}
            },
            "resources": [
                {"uri": "skill://acme/billing/refunds/SKILL.md",
                 "digest": format!("sha256:{}", "a".repeat(64)), "size": 12},
                {"uri": "skill://acme/billing/refunds/examples/email.md",
                 "digest": format!("sha256:{}", "b".repeat(64)), "size": 0, "x-extra": 1}
            ],
            "_meta": {"io.example/k": true}
        });
        let list: ListSkillsResult = round_trip(json!({
            "resultType": "complete",
            "skills": [entry],
            "nextCursor": "1",
            "ttlMs": 0,
            "cacheScope": "private"
        }));
        let e = &list.skills[0];
        assert_eq!(e.name(), Some("refunds"));
        assert_eq!(e.description(), Some("Process customer refund requests"));
        assert_eq!(e.root(), Some("skill://acme/billing/refunds"));
        let files = e.files().expect("a file manifest");
        assert_eq!((files.len(), files[1].size), (2, 0));
        assert_eq!(files[1].extra.get("x-extra"), Some(&json!(1)));

        let got: GetSkillResult = round_trip(json!({"skill": entry}));
        assert_eq!(&got.skill, e);
        let _: GetSkillRequestParams = round_trip(json!({"uri": "skill://a/SKILL.md"}));
    }

    #[test]
    fn resources_are_a_list_or_dynamic_or_absent() {
        let dynamic: SkillEntry = round_trip(json!({
            "uri": "skill://gen/SKILL.md",
            "frontmatter": {"name": "gen", "description": "d"},
            "resources": "dynamic"
        }));
        assert_eq!(dynamic.resources, Some(SkillResources::Dynamic(DynamicTag)));
        assert!(dynamic.files().is_none());
        let absent: SkillEntry = round_trip(json!({
            "uri": "skill://gen/SKILL.md",
            "frontmatter": {"name": "gen", "description": "d"}
        }));
        assert!(absent.resources.is_none());
        for bad in [json!("static"), json!(7), json!({"uri": "x"})] {
            let value = json!({"uri": "u", "frontmatter": {}, "resources": bad});
            assert!(
                serde_json::from_value::<SkillEntry>(value).is_err(),
                "{bad} is no file manifest"
            );
        }
        // A file without its size or digest is refused.
        let value = json!({"uri": "u", "frontmatter": {},
                           "resources": [{"uri": "u", "digest": "sha256:00"}]});
        assert!(serde_json::from_value::<SkillEntry>(value).is_err());
    }

    #[test]
    fn directory_read_round_trips() {
        let _: ReadDirectoryRequestParams =
            round_trip(json!({"uri": "skill://pdf-processing", "cursor": "2"}));
        let r: ReadDirectoryResult = round_trip(json!({
            "resources": [
                {"uri": "skill://pdf-processing/SKILL.md", "name": "pdf-processing",
                 "mimeType": "text/markdown"},
                {"uri": "skill://pdf-processing/references", "name": "references",
                 "mimeType": "inode/directory"}
            ]
        }));
        assert_eq!(
            r.resources[1].mime_type.as_deref(),
            Some(DIRECTORY_MIME_TYPE)
        );
    }

    #[test]
    fn the_capability_sits_inline_under_its_identifier() {
        let caps: ServerCapabilities = serde_json::from_value(json!({
            "resources": {},
            "extensions": {"io.modelcontextprotocol/skills": {"directoryRead": true}}
        }))
        .unwrap();
        let skills = SkillsCapability::of(&caps).expect("declared");
        assert!(skills.directory_read());
        assert_eq!(
            serde_json::Value::Object(skills.to_object()),
            json!({"directoryRead": true})
        );
        let empty: ServerCapabilities = serde_json::from_value(json!({
            "extensions": {"io.modelcontextprotocol/skills": {}}
        }))
        .unwrap();
        assert!(
            !SkillsCapability::of(&empty)
                .expect("declared")
                .directory_read()
        );
        assert!(SkillsCapability::of(&ServerCapabilities::default()).is_none());
    }
}
