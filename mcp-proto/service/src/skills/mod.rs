//! # Skills: serving and loading Agent Skills over MCP
//!
//! The Skills extension of MCP (SEP-2640, extension id `io.modelcontextprotocol/skills`)
//! serves [Agent Skills](https://agentskills.io/specification) — directories of files with a
//! `SKILL.md` whose YAML frontmatter names and describes the skill — as resources at
//! `skill://<skill-path>/<file-path>`, and adds three methods: `skills/list` (every skill's
//! entry: its `SKILL.md` URI, its frontmatter verbatim, and each file with its SHA-256 digest
//! and size), `skills/get` (one entry by URI) and, when declared, `resources/directory/read`
//! (the direct children of a skill directory).
//!
//! ## Serving skills
//!
//! A [`Skill`] is validated when it is built ([`SkillBuilder::build`], [`Skill::from_dir`]):
//! a `SKILL.md` at its root whose frontmatter has a `name` (the Agent Skills naming rules, and
//! equal to the last segment of the skill path) and a `description`; file paths that make
//! valid URIs; and the [`SkillLimits`] (by default at most 512 files and 16 MiB per skill).
//! What fails is a typed [`SkillError`], never a skill served half right. A directory on disk
//! is read once, when the skill is built.
//!
//! [`Server::skill`](crate::Server::skill) registers it: every file becomes a resource
//! (`SKILL.md` as `text/markdown` with the frontmatter's name and description), the server
//! declares the extension in its capabilities (with `directoryRead: true` unless
//! [`Server::skill_directory_read`](crate::Server::skill_directory_read) turned it off) and
//! the `resources` capability, and answers `skills/list` (paginated like `resources/list`,
//! with `ttlMs` and `cacheScope` for 2026-07-28 clients), `skills/get` (`-32602` for a URI
//! that is no skill's) and `resources/directory/read` (`-32602` for a URI that is no
//! directory).
//!
//! ```
//! use mcp_service::Server;
//! use mcp_service::skills::Skill;
//!
//! # fn main() -> Result<(), mcp_service::skills::SkillError> {
//! let skill = Skill::builder("pdf-processing")
//!     .file(
//!         "SKILL.md",
//!         "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\
//!          \nTo fill a form, read references/FORMS.md first.\n",
//!     )
//!     .file("references/FORMS.md", "# Forms\n\nField names are case-sensitive.\n")
//!     .build()?;
//! assert_eq!(skill.uri(), "skill://pdf-processing/SKILL.md");
//! // From disk instead: `Skill::from_dir("skills/pdf-processing")?`.
//! let server = Server::new("pdf-tools", "1.0.0").skill(skill);
//! # let _ = server;
//! # Ok(())
//! # }
//! ```
//!
//! ## Loading skills
//!
//! The [`Client`](crate::client::Client) lists entries ([`list_skills`], following cursors up
//! to [`ClientBuilder::max_list_pages`](crate::client::ClientBuilder::max_list_pages)) and gets one by URI ([`get_skill`]) without reading a
//! single skill file: files are read when needed, never ahead. [`load_skill`] reads the
//! skill's `SKILL.md` and verifies it against the entry — its size, its SHA-256 digest, and
//! its frontmatter, field by field — and [`read_skill_file`] reads a supporting file the same
//! way, refusing one the entry does not list. A mismatch is a [`SkillLoadError`] naming the
//! file; the content is never returned. Both calls are refused before anything is sent to a
//! server that did not declare the extension (and [`read_directory`] to one that did not
//! declare `directoryRead`).
//!
//! [`list_skills`]: crate::client::Client::list_skills
//! [`get_skill`]: crate::client::Client::get_skill
//! [`load_skill`]: crate::client::Client::load_skill
//! [`read_skill_file`]: crate::client::Client::read_skill_file
//! [`read_directory`]: crate::client::Client::read_directory
//!
//! ```no_run
//! # async fn run(client: mcp_service::client::Client) -> Result<(), Box<dyn std::error::Error>> {
//! // The registry a host shows its model: names and descriptions, from the listing alone.
//! for entry in client.list_skills().await? {
//!     println!("{}: {}", entry.name().unwrap_or("?"), entry.description().unwrap_or(""));
//! }
//! // The model picks one: its SKILL.md is read and verified now, not before.
//! let entry = client.get_skill("skill://pdf-processing/SKILL.md").await?;
//! let skill = client.load_skill(&entry).await?;
//! println!("{}", skill.skill_md());
//! // A file the instructions refer to, relative to the skill's root, verified too.
//! let forms = client.read_skill_file(&skill, "references/FORMS.md").await?;
//! # let _ = forms;
//! # Ok(())
//! # }
//! ```
//!
//! ## Decisions
//!
//! - **Frontmatter is YAML 1.2** (`yes` is a string, not `true`), read with a bounded parser:
//!   at most [`SkillLimits::max_frontmatter_bytes`] of text, nested at most
//!   [`SkillLimits::max_frontmatter_depth`] deep, and no more nodes (aliases expanded) than
//!   it has bytes; duplicate keys are refused. It must be a mapping.
//! - **Frontmatter comparison** is by value: the same keys (an absent key and a `null` one
//!   are the same), equal strings, booleans and arrays, and numbers of equal value (`1` and
//!   `1.0`, as two YAML readers may differ there).
//! - **What a directory holds**: the files of the registered skills, and the directories
//!   their paths pass through (a skill's root, its subdirectories, and the prefix segments of
//!   a nested skill path). `from_dir` skips entries whose name starts with `.` and refuses
//!   symbolic links and special files.
//! - **Text or blob**: a file that is UTF-8 is served as text, any other as a base64 blob;
//!   the digest is of the raw bytes either way, and the client checks the bytes it decoded.

mod define;
mod verify;

pub use define::{Skill, SkillBuilder, SkillError};
pub use verify::{LoadedSkill, SkillLoadError};

pub(crate) use verify::{check_entry, check_skill_md, contents_bytes, verify_bytes};

use sha2::{Digest as _, Sha256};

use crate::schema::JsonObject;

/// The bounds on a skill, where it is built ([`SkillBuilder`]) and where it is loaded (the
/// client's [`ClientBuilder::skill_limits`](crate::client::ClientBuilder::skill_limits)).
/// The defaults are the extension's: 512 files and 16 MiB per skill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkillLimits {
    /// The most files in one skill, `SKILL.md` included. Default 512.
    pub max_files: usize,
    /// The most bytes of all of a skill's files together. Default 16 MiB.
    pub max_total_bytes: u64,
    /// The most directory levels a file path may have (`references/FORMS.md` has 2 segments).
    /// Default 16.
    pub max_path_segments: usize,
    /// The most bytes of `SKILL.md` frontmatter text. Default 64 KiB.
    pub max_frontmatter_bytes: usize,
    /// The deepest nesting of mappings and sequences in the frontmatter. Default 32.
    pub max_frontmatter_depth: usize,
}

impl Default for SkillLimits {
    fn default() -> Self {
        SkillLimits {
            max_files: 512,
            max_total_bytes: 16 * 1024 * 1024,
            max_path_segments: 16,
            max_frontmatter_bytes: 64 * 1024,
            max_frontmatter_depth: 32,
        }
    }
}

/// The digest of `bytes` as skill entries carry it: `sha256:` and 64 lowercase hexadecimal
/// digits.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!(
        "sha256:{}",
        base16ct::lower::encode_string(&Sha256::digest(bytes))
    )
}

/// The 32 bytes of a `sha256:{64 lowercase hex}` digest; `None` for any other text.
pub(crate) fn parse_digest(digest: &str) -> Option<[u8; 32]> {
    let hex = digest.strip_prefix("sha256:")?;
    let mut out = [0u8; 32];
    let decoded = base16ct::lower::decode(hex, &mut out).ok()?;
    (decoded.len() == 32).then_some(out)
}

/// The YAML frontmatter of a `SKILL.md` (the text between a first line `---` and the next
/// line `---`; a leading byte-order mark is skipped), read as a JSON object within `limits`.
pub(crate) fn parse_frontmatter(text: &str, limits: &SkillLimits) -> Result<JsonObject, String> {
    let yaml = split_frontmatter(text)
        .ok_or("it does not begin with YAML frontmatter (a `---` line, the YAML, a `---` line)")?;
    if yaml.len() > limits.max_frontmatter_bytes {
        return Err(format!(
            "its frontmatter has {} bytes, more than the limit of {}",
            yaml.len(),
            limits.max_frontmatter_bytes
        ));
    }
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = limits.max_frontmatter_depth;
    budget.max_events = limits.max_frontmatter_bytes;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.alias_limits.max_total_replayed_events = limits.max_frontmatter_bytes;
    options.alias_limits.max_replay_stack_depth = limits.max_frontmatter_depth;
    options.strict_booleans = true;
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::Error;
    options.with_snippet = false;
    match serde_saphyr::from_str_with_options::<serde_json::Value>(yaml, options) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err("its frontmatter is not a YAML mapping".to_owned()),
        Err(e) => Err(format!("its frontmatter is not valid YAML: {e}")),
    }
}

/// The YAML text of the frontmatter block, or `None` when the text does not begin with one.
fn split_frontmatter(text: &str) -> Option<&str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next()?;
    if !first.ends_with('\n') || first.trim_end_matches(['\r', '\n']) != "---" {
        return None;
    }
    let start = first.len();
    let mut end = start;
    for line in lines {
        if line
            .trim_end_matches(['\r', '\n'])
            .trim_end_matches([' ', '\t'])
            == "---"
        {
            return text.get(start..end);
        }
        end += line.len();
    }
    None
}

/// The Agent Skills naming rules: 1 to 64 characters, lowercase ASCII letters, digits and
/// hyphens, no hyphen first, last or next to another. `Err` says which rule is broken.
pub(crate) fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 64 {
        return Err("a name has 1 to 64 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err("a name has only lowercase letters, digits and hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return Err("a name neither starts nor ends with a hyphen, nor has two in a row");
    }
    Ok(())
}

/// A MIME type for a skill file, from its extension; otherwise `text/plain` for UTF-8 text
/// and `application/octet-stream` for anything else.
pub(crate) fn mime_type_of(path: &str, bytes: &[u8]) -> &'static str {
    let extension = path
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" => "text/plain",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "xml" => "application/xml",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" | "mjs" => "text/javascript",
        "py" => "text/x-python",
        "sh" => "text/x-shellscript",
        "rs" => "text/x-rust",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        _ if std::str::from_utf8(bytes).is_ok() => "text/plain",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digests_are_sha256_in_lowercase_hex() {
        // The SHA-256 of the empty string (FIPS 180-2 test vector).
        let empty = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(sha256_digest(b""), empty);
        assert_eq!(
            parse_digest(empty).map(|d| d[0]),
            Some(0xe3),
            "a digest parses back"
        );
        for bad in [
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
            "sha256:e3b0",
            "sha512:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85z",
        ] {
            assert_eq!(parse_digest(bad), None, "{bad}");
        }
    }

    #[test]
    fn frontmatter_is_the_leading_yaml_block() {
        let limits = SkillLimits::default();
        let fm = parse_frontmatter(
            "\u{feff}---\r\nname: x\r\ndescription: \"A: b\"\r\nflag: yes\r\nn: 2\r\nmetadata:\r\n  v: '1.0'\r\n--- \r\nbody\n---\n",
            &limits,
        )
        .unwrap();
        assert_eq!(
            serde_json::Value::Object(fm),
            json!({"name": "x", "description": "A: b", "flag": "yes", "n": 2,
                   "metadata": {"v": "1.0"}})
        );
        for (text, why) in [
            ("name: x\n", "no opening line"),
            ("---\nname: x\n", "no closing line"),
            ("--- \nname: x\n---\n", "the opening line is exactly ---"),
            ("---\n- a\n- b\n---\n", "not a mapping"),
            ("---\n\n---\n", "empty"),
            ("---\na: [\n---\n", "not YAML"),
            ("---\na: 1\na: 2\n---\n", "a duplicate key"),
            ("---", "nothing but the marker"),
        ] {
            assert!(parse_frontmatter(text, &limits).is_err(), "{why}");
        }
    }

    #[test]
    fn frontmatter_parsing_is_bounded() {
        let limits = SkillLimits {
            max_frontmatter_bytes: 64,
            ..SkillLimits::default()
        };
        let long = format!("---\ndescription: {}\n---\n", "x".repeat(100));
        assert!(
            parse_frontmatter(&long, &limits)
                .unwrap_err()
                .contains("limit")
        );
        let limits = SkillLimits {
            max_frontmatter_depth: 3,
            ..SkillLimits::default()
        };
        assert!(parse_frontmatter("---\na: {b: {c: {d: {e: 1}}}}\n---\n", &limits).is_err());
        assert!(parse_frontmatter("---\na: {b: 1}\n---\n", &limits).is_ok());
        // An alias bomb: nine levels of ten aliases expand to 10^9 nodes.
        let mut bomb = String::from("---\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        bomb.push_str("---\n");
        assert!(parse_frontmatter(&bomb, &SkillLimits::default()).is_err());
    }

    #[test]
    fn names_follow_the_agent_skills_rules() {
        for good in ["pdf-processing", "a", "x1-2y", &"a".repeat(64)] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "a--b",
            "PDF",
            "pdf_processing",
            "pdf processing",
            "é",
            &"a".repeat(65),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn mime_types_by_extension_then_content() {
        assert_eq!(mime_type_of("SKILL.md", b""), "text/markdown");
        assert_eq!(mime_type_of("scripts/extract.PY", b""), "text/x-python");
        assert_eq!(mime_type_of("LICENSE", b"MIT"), "text/plain");
        assert_eq!(
            mime_type_of("data.bin", &[0xff, 0xfe, 0x00]),
            "application/octet-stream"
        );
    }
}
