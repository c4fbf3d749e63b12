//! [`Skill`]: a skill a server serves, validated when it is built.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{SkillLimits, check_name, mime_type_of, parse_frontmatter, sha256_digest};
use crate::schema::{JsonObject, Resource, SKILL_MD, SkillEntry, SkillResource, SkillResources};

/// The URI scheme skills are served under.
const SCHEME: &str = "skill://";

/// The Agent Skills limit on a description.
const MAX_DESCRIPTION_CHARS: usize = 1024;

/// Why a skill could not be built. Each variant names what is wrong (the file, the path, the
/// limit), so the skill can be fixed; a server never serves a skill that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillError {
    /// A file or directory on disk could not be read.
    #[error("cannot read {path}: {source}", path = path.display())]
    Io {
        /// What could not be read.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The skill path is not one or more `/`-separated segments that make a valid URI.
    #[error("invalid skill path {path:?}: {reason}")]
    InvalidSkillPath {
        /// The skill path.
        path: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// A file path is not relative, `/`-separated and URI-safe, or clashes with another.
    #[error("invalid file path {path:?}: {reason}")]
    InvalidFilePath {
        /// The file's path in the skill.
        path: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// A directory entry on disk is neither a regular file nor a directory (symbolic links
    /// are not followed).
    #[error("{path} is neither a regular file nor a directory", path = path.display())]
    UnsupportedFile {
        /// The entry.
        path: PathBuf,
    },
    /// The skill has no `SKILL.md` at its root.
    #[error("the skill has no SKILL.md at its root")]
    MissingSkillMd,
    /// `SKILL.md` has no readable frontmatter, or it lacks a `name` or a `description`.
    #[error("SKILL.md: {reason}")]
    Frontmatter {
        /// What is wrong.
        reason: String,
    },
    /// The frontmatter's `name` breaks the Agent Skills naming rules.
    #[error("invalid skill name {name:?}: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// The frontmatter's `name` is not the last segment of the skill path.
    #[error("the skill's name {name:?} is not the last segment of its path {path:?}")]
    NameMismatch {
        /// The frontmatter's name.
        name: String,
        /// The skill path.
        path: String,
    },
    /// The skill has more files than [`SkillLimits::max_files`].
    #[error("the skill has more than {limit} files")]
    TooManyFiles {
        /// The limit.
        limit: usize,
    },
    /// The skill's files add up to more than [`SkillLimits::max_total_bytes`].
    #[error("the skill's files add up to more than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// A file path has more segments than [`SkillLimits::max_path_segments`].
    #[error("{path:?} is nested deeper than {limit} path segments")]
    TooDeep {
        /// The file's path in the skill.
        path: String,
        /// The limit.
        limit: usize,
    },
}

/// One file of a built skill: its path in the skill, its bytes, and the resource it is
/// served as.
#[derive(Debug)]
pub(crate) struct SkillFile {
    pub(crate) bytes: Arc<[u8]>,
    pub(crate) resource: Resource,
}

#[derive(Debug)]
struct SkillData {
    path: String,
    entry: SkillEntry,
    files: Vec<SkillFile>,
}

/// A skill a server serves ([`Server::skill`](crate::Server::skill)): its files, read and
/// validated when it was built, with the entry `skills/list` gives for it. Cheap to clone.
///
/// Build one from memory with [`Skill::builder`], or from a directory with
/// [`Skill::from_dir`]; see the [module docs](super) for what is validated.
#[derive(Debug, Clone)]
pub struct Skill {
    inner: Arc<SkillData>,
}

impl Skill {
    /// A builder for the skill at `path` in the server's skill namespace: one or more
    /// `/`-separated segments (`git-workflow`, `acme/billing/refunds`), the last of which is
    /// the skill's name. The skill's URI is `skill://<path>/SKILL.md`.
    pub fn builder(path: impl Into<String>) -> SkillBuilder {
        SkillBuilder {
            path: path.into(),
            files: Vec::new(),
            limits: SkillLimits::default(),
        }
    }

    /// The skill in directory `dir`, at the skill path named like the directory, with the
    /// default [`SkillLimits`] (use [`SkillBuilder::dir`] for another path or other limits).
    ///
    /// # Errors
    ///
    /// The directory cannot be read, or the skill in it is not valid (see [`SkillError`]).
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Skill, SkillError> {
        let dir = dir.as_ref();
        let name = dir.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
            SkillError::InvalidSkillPath {
                path: dir.display().to_string(),
                reason: "the directory has no UTF-8 name",
            }
        })?;
        Skill::builder(name).dir(dir)?.build()
    }

    /// The skill's path in the server's skill namespace.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// The skill's name (its frontmatter's `name`, the last segment of its path).
    pub fn name(&self) -> &str {
        self.inner.entry.name().unwrap_or_default()
    }

    /// The skill's URI: that of its `SKILL.md`.
    pub fn uri(&self) -> &str {
        &self.inner.entry.uri
    }

    /// The entry `skills/list` and `skills/get` give for the skill.
    pub fn entry(&self) -> &SkillEntry {
        &self.inner.entry
    }

    /// The skill's files, `SKILL.md` first, as the resources they are served as.
    pub fn resources(&self) -> impl Iterator<Item = &Resource> {
        self.inner.files.iter().map(|f| &f.resource)
    }

    pub(crate) fn files(&self) -> &[SkillFile] {
        &self.inner.files
    }
}

/// Builds a [`Skill`] ([`Skill::builder`]): add its files, then [`build`](Self::build),
/// which validates it.
#[derive(Debug, Clone)]
#[must_use]
pub struct SkillBuilder {
    path: String,
    files: Vec<(String, Vec<u8>)>,
    limits: SkillLimits,
}

impl SkillBuilder {
    /// Adds the file at `path` in the skill (relative, `/`-separated: `SKILL.md`,
    /// `references/FORMS.md`) with these bytes.
    pub fn file(mut self, path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        self.files.push((path.into(), bytes.into()));
        self
    }

    /// The limits the skill is held to (default [`SkillLimits::default`]); set them before
    /// [`dir`](Self::dir), which applies them while it reads.
    pub fn limits(mut self, limits: SkillLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Adds every file under directory `dir`, read now, at its path relative to `dir`.
    /// Entries whose name starts with `.` are skipped; symbolic links and special files are
    /// refused. Reading stops at the first limit exceeded.
    ///
    /// # Errors
    ///
    /// An entry cannot be read, is not a regular file or a directory, has a name that is not
    /// UTF-8, or a limit is exceeded.
    pub fn dir(mut self, dir: impl AsRef<Path>) -> Result<Self, SkillError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SkillError::Io { path, source }
        };
        let mut total: u64 = self.files.iter().map(|(_, b)| b.len() as u64).sum();
        // Directories still to read: where on disk, and their path in the skill.
        let mut pending = vec![(dir.as_ref().to_path_buf(), String::new())];
        while let Some((disk, prefix)) = pending.pop() {
            let mut entries = std::fs::read_dir(&disk)
                .map_err(io(&disk))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(io(&disk))?;
            entries.sort_by_key(std::fs::DirEntry::file_name);
            for entry in entries {
                let on_disk = entry.path();
                let name = entry.file_name();
                let name = name.to_str().ok_or_else(|| SkillError::InvalidFilePath {
                    path: on_disk.display().to_string(),
                    reason: "a file name is UTF-8",
                })?;
                if name.starts_with('.') {
                    continue;
                }
                let path = format!("{prefix}{name}");
                if path.split('/').count() > self.limits.max_path_segments {
                    return Err(SkillError::TooDeep {
                        path,
                        limit: self.limits.max_path_segments,
                    });
                }
                let kind = entry.file_type().map_err(io(&on_disk))?;
                if kind.is_dir() {
                    pending.push((on_disk, format!("{path}/")));
                } else if kind.is_file() {
                    if self.files.len() >= self.limits.max_files {
                        return Err(SkillError::TooManyFiles {
                            limit: self.limits.max_files,
                        });
                    }
                    let room = self.limits.max_total_bytes.saturating_sub(total);
                    let mut bytes = Vec::new();
                    std::fs::File::open(&on_disk)
                        .and_then(|f| f.take(room.saturating_add(1)).read_to_end(&mut bytes))
                        .map_err(io(&on_disk))?;
                    if bytes.len() as u64 > room {
                        return Err(SkillError::TooLarge {
                            limit: self.limits.max_total_bytes,
                        });
                    }
                    total += bytes.len() as u64;
                    self.files.push((path, bytes));
                } else {
                    return Err(SkillError::UnsupportedFile { path: on_disk });
                }
            }
        }
        Ok(self)
    }

    /// The skill, validated: its path, its files' paths, the limits, and `SKILL.md`'s
    /// frontmatter (a `name` that follows the naming rules and is the path's last segment, a
    /// non-empty `description` of at most 1024 characters).
    ///
    /// # Errors
    ///
    /// The first rule broken, as a [`SkillError`].
    pub fn build(self) -> Result<Skill, SkillError> {
        let SkillBuilder {
            path,
            files,
            limits,
        } = self;
        check_skill_path(&path)?;
        if files.len() > limits.max_files {
            return Err(SkillError::TooManyFiles {
                limit: limits.max_files,
            });
        }
        let total = files
            .iter()
            .try_fold(0u64, |sum, (_, b)| sum.checked_add(b.len() as u64));
        if total.is_none_or(|t| t > limits.max_total_bytes) {
            return Err(SkillError::TooLarge {
                limit: limits.max_total_bytes,
            });
        }
        let mut by_path = BTreeMap::new();
        for (file, bytes) in files {
            check_file_path(&file, &limits)?;
            if by_path.contains_key(&file) {
                return Err(SkillError::InvalidFilePath {
                    path: file,
                    reason: "the file is given twice",
                });
            }
            by_path.insert(file, bytes);
        }
        // A path that is a file cannot be a directory too.
        for file in by_path.keys() {
            for (slash, _) in file.match_indices('/') {
                if by_path.contains_key(&file[..slash]) {
                    return Err(SkillError::InvalidFilePath {
                        path: file[..slash].to_owned(),
                        reason: "a file has the path of a directory of another file",
                    });
                }
            }
        }
        let skill_md = by_path.remove(SKILL_MD).ok_or(SkillError::MissingSkillMd)?;
        let frontmatter = frontmatter_of(&skill_md, &limits)?;
        let name = string_field(&frontmatter, "name")?.to_owned();
        let description = string_field(&frontmatter, "description")?.to_owned();
        check_name(&name).map_err(|reason| SkillError::InvalidName {
            name: name.clone(),
            reason,
        })?;
        if path.rsplit('/').next() != Some(name.as_str()) {
            return Err(SkillError::NameMismatch { name, path });
        }
        if description.chars().count() > MAX_DESCRIPTION_CHARS {
            return Err(SkillError::Frontmatter {
                reason: format!(
                    "its description is longer than {MAX_DESCRIPTION_CHARS} characters"
                ),
            });
        }

        let root = format!("{SCHEME}{path}");
        let mut skill_files = Vec::with_capacity(by_path.len() + 1);
        let skill_md_resource = Resource::new(format!("{root}/{SKILL_MD}"), name.clone())
            .description(description)
            .mime_type("text/markdown");
        skill_files.push(file_of(skill_md_resource, skill_md));
        for (file, bytes) in by_path {
            let leaf = file.rsplit('/').next().unwrap_or(&file).to_owned();
            let resource = Resource::new(format!("{root}/{file}"), leaf)
                .description(format!("{file}, a file of the {name} skill"))
                .mime_type(mime_type_of(&file, &bytes));
            skill_files.push(file_of(resource, bytes));
        }
        let entry = SkillEntry {
            uri: format!("{root}/{SKILL_MD}"),
            frontmatter,
            resources: Some(SkillResources::Files(
                skill_files
                    .iter()
                    .map(|f| SkillResource {
                        uri: f.resource.uri.clone(),
                        digest: sha256_digest(&f.bytes),
                        size: f.bytes.len() as u64,
                        extra: JsonObject::new(),
                    })
                    .collect(),
            )),
            ..SkillEntry::default()
        };
        Ok(Skill {
            inner: Arc::new(SkillData {
                path,
                entry,
                files: skill_files,
            }),
        })
    }
}

fn file_of(mut resource: Resource, bytes: Vec<u8>) -> SkillFile {
    resource.size = Some(bytes.len() as u64);
    SkillFile {
        bytes: bytes.into(),
        resource,
    }
}

fn frontmatter_of(skill_md: &[u8], limits: &SkillLimits) -> Result<JsonObject, SkillError> {
    let text = std::str::from_utf8(skill_md).map_err(|_| SkillError::Frontmatter {
        reason: "it is not UTF-8 text".to_owned(),
    })?;
    parse_frontmatter(text, limits).map_err(|reason| SkillError::Frontmatter { reason })
}

fn string_field<'a>(frontmatter: &'a JsonObject, key: &str) -> Result<&'a str, SkillError> {
    match frontmatter.get(key).and_then(serde_json::Value::as_str) {
        Some(value) if !value.trim().is_empty() => Ok(value),
        _ => Err(SkillError::Frontmatter {
            reason: format!("its frontmatter has no non-empty string `{key}`"),
        }),
    }
}

/// Characters a path segment may hold as is: RFC 3986 unreserved and sub-delims (no
/// percent-encoding, so a segment is the same text in a path and in a URI).
fn uri_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b)
}

fn check_skill_path(path: &str) -> Result<(), SkillError> {
    let fail = |reason| {
        Err(SkillError::InvalidSkillPath {
            path: path.to_owned(),
            reason,
        })
    };
    for segment in path.split('/') {
        if segment.is_empty() {
            return fail("a skill path has no empty segment (nor a leading or trailing /)");
        }
        if segment == "." || segment == ".." {
            return fail("a skill path has no . or .. segment");
        }
        if !segment.bytes().all(uri_safe) {
            return fail(
                "a skill path segment has only RFC 3986 unreserved and sub-delims characters",
            );
        }
    }
    Ok(())
}

fn check_file_path(path: &str, limits: &SkillLimits) -> Result<(), SkillError> {
    let fail = |reason| {
        Err(SkillError::InvalidFilePath {
            path: path.to_owned(),
            reason,
        })
    };
    let mut segments = 0;
    for segment in path.split('/') {
        segments += 1;
        if segment.is_empty() {
            return fail("a file path is relative, with no empty segment");
        }
        if segment == "." || segment == ".." {
            return fail("a file path has no . or .. segment");
        }
        if !segment
            .bytes()
            .all(|b| uri_safe(b) || b == b':' || b == b'@')
        {
            return fail("a file path segment has only URI path characters (no space, %, \\ …)");
        }
    }
    if segments > limits.max_path_segments {
        return Err(SkillError::TooDeep {
            path: path.to_owned(),
            limit: limits.max_path_segments,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKILL_MD_TEXT: &str = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nmetadata:\n  version: \"2.1.0\"\n---\n\nBody.\n";

    fn pdf() -> SkillBuilder {
        Skill::builder("pdf-processing")
            .file("SKILL.md", SKILL_MD_TEXT)
            .file("references/FORMS.md", "# Forms\n")
    }

    #[test]
    fn a_valid_skill_has_its_entry_and_resources() {
        let skill = pdf()
            .file("scripts/extract.py", "print(1)\n")
            .build()
            .unwrap();
        assert_eq!(skill.uri(), "skill://pdf-processing/SKILL.md");
        assert_eq!(
            (skill.name(), skill.path()),
            ("pdf-processing", "pdf-processing")
        );
        let entry = skill.entry();
        assert_eq!(
            serde_json::Value::Object(entry.frontmatter.clone()),
            serde_json::json!({
                "name": "pdf-processing",
                "description": "Extract, fill, and assemble PDF documents",
                "metadata": {"version": "2.1.0"}
            })
        );
        let files = entry.files().unwrap();
        let uris: Vec<&str> = files.iter().map(|f| f.uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                "skill://pdf-processing/SKILL.md",
                "skill://pdf-processing/references/FORMS.md",
                "skill://pdf-processing/scripts/extract.py"
            ]
        );
        assert_eq!(files[0].digest, sha256_digest(SKILL_MD_TEXT.as_bytes()));
        assert_eq!(files[1].size, 8);
        let resources: Vec<&Resource> = skill.resources().collect();
        assert_eq!(resources[0].name, "pdf-processing");
        assert_eq!(
            resources[0].description.as_deref(),
            Some("Extract, fill, and assemble PDF documents")
        );
        assert_eq!(resources[0].mime_type.as_deref(), Some("text/markdown"));
        assert_eq!(resources[1].name, "FORMS.md");
        assert_eq!(
            resources[1].description.as_deref(),
            Some("references/FORMS.md, a file of the pdf-processing skill")
        );
        assert_eq!(resources[2].mime_type.as_deref(), Some("text/x-python"));
        assert_eq!(resources[2].size, Some(9));
    }

    #[test]
    fn a_nested_skill_path_ends_in_the_name() {
        let text = "---\nname: refunds\ndescription: Refund requests\n---\n";
        let skill = Skill::builder("acme/billing/refunds")
            .file("SKILL.md", text)
            .build()
            .unwrap();
        assert_eq!(skill.uri(), "skill://acme/billing/refunds/SKILL.md");
        let err = Skill::builder("acme/billing/returns")
            .file("SKILL.md", text)
            .build()
            .unwrap_err();
        assert!(matches!(err, SkillError::NameMismatch { .. }), "{err}");
    }

    /// A builder, and what its error must be.
    type Case = (SkillBuilder, fn(&SkillError) -> bool);

    #[test]
    fn invalid_skills_are_refused_with_a_typed_error() {
        let md = |fm: &str| format!("---\n{fm}\n---\nbody\n");
        let cases: Vec<Case> = vec![
            (Skill::builder("x").file("README.md", "hi"), |e| {
                matches!(e, SkillError::MissingSkillMd)
            }),
            (
                Skill::builder("x").file("SKILL.md", "no frontmatter"),
                |e| matches!(e, SkillError::Frontmatter { .. }),
            ),
            (
                Skill::builder("x").file("SKILL.md", md("name: x")),
                |e| matches!(e, SkillError::Frontmatter { reason } if reason.contains("description")),
            ),
            (
                Skill::builder("x").file("SKILL.md", md("description: d")),
                |e| matches!(e, SkillError::Frontmatter { reason } if reason.contains("name")),
            ),
            (
                Skill::builder("x").file("SKILL.md", md("name: 7\ndescription: d")),
                |e| matches!(e, SkillError::Frontmatter { .. }),
            ),
            (
                Skill::builder("X").file("SKILL.md", md("name: X\ndescription: d")),
                |e| matches!(e, SkillError::InvalidName { .. }),
            ),
            (
                Skill::builder("y").file("SKILL.md", md("name: x\ndescription: d")),
                |e| matches!(e, SkillError::NameMismatch { .. }),
            ),
            (
                Skill::builder("x").file(
                    "SKILL.md",
                    md(&format!("name: x\ndescription: {}", "d".repeat(1025))),
                ),
                |e| matches!(e, SkillError::Frontmatter { .. }),
            ),
            (
                Skill::builder("a//x").file("SKILL.md", md("name: x\ndescription: d")),
                |e| matches!(e, SkillError::InvalidSkillPath { .. }),
            ),
            (
                Skill::builder("a b/x").file("SKILL.md", md("name: x\ndescription: d")),
                |e| matches!(e, SkillError::InvalidSkillPath { .. }),
            ),
            (pdf().file("../escape.md", "x"), |e| {
                matches!(e, SkillError::InvalidFilePath { .. })
            }),
            (pdf().file("/abs.md", "x"), |e| {
                matches!(e, SkillError::InvalidFilePath { .. })
            }),
            (pdf().file("my file.md", "x"), |e| {
                matches!(e, SkillError::InvalidFilePath { .. })
            }),
            (pdf().file("references/FORMS.md", "again"), |e| {
                matches!(e, SkillError::InvalidFilePath { .. })
            }),
            (
                pdf().file("references", "a file named like a directory"),
                |e| matches!(e, SkillError::InvalidFilePath { .. }),
            ),
        ];
        for (i, (builder, expected)) in cases.into_iter().enumerate() {
            let err = builder.build().unwrap_err();
            assert!(expected(&err), "case {i}: {err}");
        }
    }

    #[test]
    fn limits_bound_what_is_built() {
        let limits = SkillLimits {
            max_files: 2,
            ..SkillLimits::default()
        };
        let err = pdf().file("c.md", "c").limits(limits).build().unwrap_err();
        assert!(
            matches!(err, SkillError::TooManyFiles { limit: 2 }),
            "{err}"
        );
        assert!(pdf().limits(limits).build().is_ok(), "two files fit");

        let mut limits = SkillLimits {
            max_total_bytes: SKILL_MD_TEXT.len() as u64 + 8,
            ..SkillLimits::default()
        };
        assert!(pdf().limits(limits).build().is_ok(), "exactly at the limit");
        limits.max_total_bytes -= 1;
        let err = pdf().limits(limits).build().unwrap_err();
        assert!(matches!(err, SkillError::TooLarge { .. }), "{err}");

        let limits = SkillLimits {
            max_path_segments: 2,
            ..SkillLimits::default()
        };
        let err = pdf()
            .file("a/b/c.md", "x")
            .limits(limits)
            .build()
            .unwrap_err();
        assert!(matches!(err, SkillError::TooDeep { .. }), "{err}");
    }

    /// A fresh directory under the system's temporary directory, removed when dropped.
    struct TempDir(PathBuf);
    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let dir = std::env::temp_dir().join(format!(
                "mcp-skills-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_directory_is_read_once_with_its_subdirectories() {
        let tmp = TempDir::new("dir");
        let root = tmp.0.join("pdf-processing");
        std::fs::create_dir_all(root.join("references")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join("SKILL.md"), SKILL_MD_TEXT).unwrap();
        std::fs::write(root.join("references/FORMS.md"), "# Forms\n").unwrap();
        std::fs::write(root.join(".git/config"), "hidden").unwrap();
        let skill = Skill::from_dir(&root).unwrap();
        // Changing the files afterwards changes nothing served.
        std::fs::write(root.join("references/FORMS.md"), "changed").unwrap();
        assert_eq!(skill.entry(), pdf().build().unwrap().entry());

        let limits = SkillLimits {
            max_total_bytes: 10,
            ..SkillLimits::default()
        };
        let err = Skill::builder("pdf-processing")
            .limits(limits)
            .dir(&root)
            .unwrap_err();
        assert!(matches!(err, SkillError::TooLarge { limit: 10 }), "{err}");
        let err = Skill::from_dir(tmp.0.join("missing")).unwrap_err();
        assert!(matches!(err, SkillError::Io { .. }), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_are_not_followed() {
        let tmp = TempDir::new("link");
        let root = tmp.0.join("pdf-processing");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("SKILL.md"), SKILL_MD_TEXT).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("host")).unwrap();
        let err = Skill::from_dir(&root).unwrap_err();
        assert!(matches!(err, SkillError::UnsupportedFile { .. }), "{err}");
    }
}
