//! Checking what a client reads of a skill against the skill's entry: [`LoadedSkill`] and
//! [`SkillLoadError`].

use std::collections::HashSet;

use base64::Engine as _;
use sha2::{Digest as _, Sha256};

use super::{SkillLimits, parse_digest, parse_frontmatter, sha256_digest};
use crate::client::RequestError;
use crate::schema::{JsonObject, ResourceContents, SKILL_MD, SkillEntry, SkillResource};

/// Why a skill, or one of its files, was not loaded. Every variant that concerns a file
/// names it (`uri`); content that failed a check is never handed out.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SkillLoadError {
    /// The request for the file failed (the server answered an error, the transport failed,
    /// or the server did not declare the extension).
    #[error("{uri}: {source}")]
    Request {
        /// The file asked for.
        uri: String,
        /// Why the request failed.
        #[source]
        source: Box<RequestError>,
    },
    /// The entry lists no files (a skill generated on demand): nothing to verify against,
    /// so the skill is not loaded.
    #[error("{uri}: the entry lists no files, so its content cannot be verified")]
    NoManifest {
        /// The skill's URI.
        uri: String,
    },
    /// The entry is not one a skill can be loaded from: its URI does not end in
    /// `/SKILL.md`, a digest is malformed, a file is outside the skill or listed twice,
    /// `SKILL.md` is not listed, or it exceeds the client's [`SkillLimits`].
    #[error("{uri}: invalid skill entry: {reason}")]
    InvalidEntry {
        /// The skill's URI.
        uri: String,
        /// What is wrong.
        reason: String,
    },
    /// The file is not among those the entry lists: reading it would be reading content
    /// no digest covers.
    #[error("{uri} is not listed in the skill's resources")]
    Unlisted {
        /// The file asked for.
        uri: String,
    },
    /// The server's answer had no contents for the file's URI (or undecodable ones).
    #[error("{uri}: the server returned no contents for it")]
    MissingContents {
        /// The file asked for.
        uri: String,
    },
    /// The file's length is not the entry's `size`.
    #[error("{uri}: {actual} bytes, where the skill's entry lists {expected}")]
    SizeMismatch {
        /// The file.
        uri: String,
        /// The entry's size.
        expected: u64,
        /// The length read.
        actual: u64,
    },
    /// The file's SHA-256 is not the entry's `digest`.
    #[error("{uri}: digest {actual}, where the skill's entry lists {expected}")]
    DigestMismatch {
        /// The file.
        uri: String,
        /// The entry's digest.
        expected: String,
        /// The digest of the bytes read.
        actual: String,
    },
    /// `SKILL.md`'s frontmatter is not the entry's `frontmatter` (the first key that
    /// differs is named).
    #[error("{uri}: frontmatter field {field:?} is not the one the skill's entry lists")]
    FrontmatterMismatch {
        /// The skill's `SKILL.md`.
        uri: String,
        /// The first key whose values differ.
        field: String,
    },
    /// `SKILL.md` is not UTF-8 or has no readable frontmatter.
    #[error("{uri}: {reason}")]
    Frontmatter {
        /// The skill's `SKILL.md`.
        uri: String,
        /// What is wrong.
        reason: String,
    },
}

/// A skill whose `SKILL.md` was read and verified against its entry
/// ([`Client::load_skill`](crate::client::Client::load_skill)): the entry it was loaded from,
/// which [`Client::read_skill_file`](crate::client::Client::read_skill_file) verifies the
/// skill's other files against while the skill is in use.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedSkill {
    entry: SkillEntry,
    skill_md: String,
}

impl LoadedSkill {
    pub(crate) fn new(entry: SkillEntry, skill_md: String) -> Self {
        LoadedSkill { entry, skill_md }
    }

    /// The entry the skill was loaded from.
    pub fn entry(&self) -> &SkillEntry {
        &self.entry
    }

    /// The skill's URI (its `SKILL.md`).
    pub fn uri(&self) -> &str {
        &self.entry.uri
    }

    /// The text of `SKILL.md`, frontmatter included, as verified.
    pub fn skill_md(&self) -> &str {
        &self.skill_md
    }

    /// The URI a reference in the skill names: a relative path (`references/FORMS.md`,
    /// `./scripts/run.py`) resolves against the skill's root, a URI is taken as is. `None`
    /// for a relative path that leaves the skill's root (`..`).
    pub fn resolve(&self, reference: &str) -> Option<String> {
        if reference.contains("://") {
            return Some(reference.to_owned());
        }
        let root = self.entry.root()?;
        let mut segments = Vec::new();
        for segment in reference.split('/') {
            match segment {
                "" | "." => {}
                ".." => return None,
                s => segments.push(s),
            }
        }
        (!segments.is_empty()).then(|| format!("{root}/{}", segments.join("/")))
    }

    /// The entry's listing of `uri`, if the skill has such a file.
    pub fn listed(&self, uri: &str) -> Option<&SkillResource> {
        self.entry.files()?.iter().find(|f| f.uri == uri)
    }
}

/// Whether a skill can be loaded from `entry` within `limits`: a file manifest, a URI that
/// ends in `/SKILL.md` and whose last path segment is the frontmatter's name, well-formed
/// digests, every file under the skill's root and listed once, `SKILL.md` among them.
pub(crate) fn check_entry(entry: &SkillEntry, limits: &SkillLimits) -> Result<(), SkillLoadError> {
    let invalid = |reason: String| SkillLoadError::InvalidEntry {
        uri: entry.uri.clone(),
        reason,
    };
    let files = entry.files().ok_or_else(|| SkillLoadError::NoManifest {
        uri: entry.uri.clone(),
    })?;
    let root = entry
        .root()
        .ok_or_else(|| invalid(format!("its URI does not end in /{SKILL_MD}")))?;
    let last = root.rsplit('/').next().unwrap_or_default();
    if entry.name() != Some(last) {
        return Err(invalid(format!(
            "its frontmatter's name is not {last:?}, the last segment of its path"
        )));
    }
    if files.len() > limits.max_files {
        return Err(invalid(format!(
            "{} files, more than the limit of {}",
            files.len(),
            limits.max_files
        )));
    }
    let total = files
        .iter()
        .try_fold(0u64, |sum, f| sum.checked_add(f.size));
    if total.is_none_or(|t| t > limits.max_total_bytes) {
        return Err(invalid(format!(
            "its files add up to more than the limit of {} bytes",
            limits.max_total_bytes
        )));
    }
    let inside = format!("{root}/");
    let mut seen = HashSet::new();
    for f in files {
        if !f.uri.starts_with(&inside) {
            return Err(invalid(format!("{} is outside the skill's root", f.uri)));
        }
        if !seen.insert(f.uri.as_str()) {
            return Err(invalid(format!("{} is listed twice", f.uri)));
        }
        if parse_digest(&f.digest).is_none() {
            return Err(invalid(format!(
                "{} has digest {:?}, not sha256:{{64 lowercase hex digits}}",
                f.uri, f.digest
            )));
        }
    }
    if !seen.contains(entry.uri.as_str()) {
        return Err(invalid(format!("{SKILL_MD} is not listed")));
    }
    Ok(())
}

/// The raw bytes of `uri` in a `resources/read` answer: its text's UTF-8, or its blob
/// decoded.
pub(crate) fn contents_bytes(
    contents: &[ResourceContents],
    uri: &str,
) -> Result<Vec<u8>, SkillLoadError> {
    let missing = || SkillLoadError::MissingContents {
        uri: uri.to_owned(),
    };
    match contents
        .iter()
        .find(|c| c.uri() == uri)
        .ok_or_else(missing)?
    {
        ResourceContents::Text(t) => Ok(t.text.as_bytes().to_vec()),
        ResourceContents::Blob(b) => base64::engine::general_purpose::STANDARD
            .decode(&b.blob)
            .map_err(|_| missing()),
    }
}

/// Whether `bytes` are the file `listed` describes: its size first, then its digest.
pub(crate) fn verify_bytes(listed: &SkillResource, bytes: &[u8]) -> Result<(), SkillLoadError> {
    let actual = bytes.len() as u64;
    if actual != listed.size {
        return Err(SkillLoadError::SizeMismatch {
            uri: listed.uri.clone(),
            expected: listed.size,
            actual,
        });
    }
    let digest: [u8; 32] = Sha256::digest(bytes).into();
    if parse_digest(&listed.digest) != Some(digest) {
        return Err(SkillLoadError::DigestMismatch {
            uri: listed.uri.clone(),
            expected: listed.digest.clone(),
            actual: sha256_digest(bytes),
        });
    }
    Ok(())
}

/// Whether verified `SKILL.md` bytes carry the entry's frontmatter; the skill's `SKILL.md`
/// text when they do.
pub(crate) fn check_skill_md(
    entry: &SkillEntry,
    bytes: Vec<u8>,
    limits: &SkillLimits,
) -> Result<String, SkillLoadError> {
    let fail = |reason: String| SkillLoadError::Frontmatter {
        uri: entry.uri.clone(),
        reason,
    };
    let text = String::from_utf8(bytes).map_err(|_| fail("it is not UTF-8 text".to_owned()))?;
    let frontmatter = parse_frontmatter(&text, limits).map_err(fail)?;
    match frontmatter_difference(&frontmatter, &entry.frontmatter) {
        Some(field) => Err(SkillLoadError::FrontmatterMismatch {
            uri: entry.uri.clone(),
            field,
        }),
        None => Ok(text),
    }
}

/// The first key (in `a`'s order, then `b`'s) whose values differ between two frontmatter
/// objects; `None` when they are the same. An absent key is `null`; numbers compare by value.
pub(crate) fn frontmatter_difference(a: &JsonObject, b: &JsonObject) -> Option<String> {
    let null = serde_json::Value::Null;
    a.keys()
        .chain(b.keys().filter(|k| !a.contains_key(*k)))
        .find(|k| !same(a.get(*k).unwrap_or(&null), b.get(*k).unwrap_or(&null)))
        .cloned()
}

/// JSON equality where numbers are equal by value (`1` and `1.0`).
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(i), Some(j), _, _) => i == j,
                (_, _, Some(i), Some(j)) => i == j,
                _ => x.as_f64().zip(y.as_f64()).is_some_and(|(p, q)| p == q),
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => frontmatter_difference(x, y).is_none(),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::SkillResources;
    use serde_json::json;

    fn object(v: serde_json::Value) -> JsonObject {
        match v {
            serde_json::Value::Object(m) => m,
            _ => JsonObject::new(),
        }
    }

    fn entry(files: serde_json::Value) -> SkillEntry {
        serde_json::from_value(json!({
            "uri": "skill://a/pdf/SKILL.md",
            "frontmatter": {"name": "pdf", "description": "d"},
            "resources": files
        }))
        .unwrap()
    }

    fn listed(uri: &str, bytes: &[u8]) -> serde_json::Value {
        json!({"uri": uri, "digest": sha256_digest(bytes), "size": bytes.len()})
    }

    #[test]
    fn frontmatter_is_compared_by_value() {
        let a = object(json!({"name": "x", "n": 12, "m": {"v": [1, 2.5]}, "z": null}));
        let b = object(json!({"m": {"v": [1.0, 2.5]}, "name": "x", "n": 12.0}));
        assert_eq!(frontmatter_difference(&a, &b), None);
        let c = object(json!({"name": "x", "n": 12, "m": {"v": [1, 2.5]}, "extra": true}));
        assert_eq!(frontmatter_difference(&a, &c), Some("extra".to_owned()));
        let d = object(json!({"name": "y", "n": 12, "m": {"v": [1, 2.5]}}));
        assert_eq!(frontmatter_difference(&a, &d), Some("name".to_owned()));
        let e = object(json!({"name": "x", "n": "12", "m": {"v": [1, 2.5]}}));
        assert_eq!(frontmatter_difference(&a, &e), Some("n".to_owned()));
        let f = object(json!({"name": "x", "n": 12, "m": {"v": [1]}}));
        assert_eq!(frontmatter_difference(&a, &f), Some("m".to_owned()));
    }

    #[test]
    fn bytes_are_checked_for_size_then_digest() {
        let file: SkillResource =
            serde_json::from_value(listed("skill://a/pdf/SKILL.md", b"hello")).unwrap();
        assert_eq!(verify_bytes(&file, b"hello"), Ok(()));
        assert!(matches!(
            verify_bytes(&file, b"hello!"),
            Err(SkillLoadError::SizeMismatch {
                expected: 5,
                actual: 6,
                ..
            })
        ));
        assert!(matches!(
            verify_bytes(&file, b"jello"),
            Err(SkillLoadError::DigestMismatch { .. })
        ));
    }

    #[test]
    fn entries_are_checked_before_anything_is_read() {
        let md = listed("skill://a/pdf/SKILL.md", b"x");
        let limits = SkillLimits::default();
        assert_eq!(check_entry(&entry(json!([md.clone()])), &limits), Ok(()));
        let mut dynamic = entry(json!([]));
        dynamic.resources = Some(SkillResources::Dynamic(Default::default()));
        assert!(matches!(
            check_entry(&dynamic, &limits),
            Err(SkillLoadError::NoManifest { .. })
        ));
        let mut none = entry(json!([]));
        none.resources = None;
        assert!(matches!(
            check_entry(&none, &limits),
            Err(SkillLoadError::NoManifest { .. })
        ));
        let bad_digest = json!({"uri": "skill://a/pdf/SKILL.md", "digest": "sha256:00", "size": 1});
        for files in [
            json!([]),
            json!([md.clone(), md.clone()]),
            json!([md.clone(), listed("skill://a/other/x.md", b"")]),
            json!([md.clone(), listed("skill://a/pdfx/x.md", b"")]),
            json!([bad_digest]),
            json!([md.clone(), {"uri": "skill://a/pdf/big", "digest": sha256_digest(b""),
                                "size": 17 * 1024 * 1024}]),
        ] {
            assert!(
                matches!(
                    check_entry(&entry(files.clone()), &limits),
                    Err(SkillLoadError::InvalidEntry { .. })
                ),
                "{files}"
            );
        }
        let mut renamed = entry(json!([md]));
        renamed.frontmatter.insert("name".into(), json!("other"));
        assert!(matches!(
            check_entry(&renamed, &limits),
            Err(SkillLoadError::InvalidEntry { .. })
        ));
    }

    #[test]
    fn references_resolve_against_the_skill_root() {
        let skill = LoadedSkill::new(entry(json!([])), String::new());
        assert_eq!(
            skill.resolve("references/FORMS.md").as_deref(),
            Some("skill://a/pdf/references/FORMS.md")
        );
        assert_eq!(
            skill.resolve("./scripts//run.py").as_deref(),
            Some("skill://a/pdf/scripts/run.py")
        );
        assert_eq!(skill.resolve("../other/SKILL.md"), None);
        assert_eq!(skill.resolve(""), None);
        assert_eq!(
            skill.resolve("skill://b/SKILL.md").as_deref(),
            Some("skill://b/SKILL.md")
        );
    }
}
