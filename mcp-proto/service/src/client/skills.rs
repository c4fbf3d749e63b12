//! The Skills extension on the client: listing and getting skill entries, loading a skill and
//! reading its files, verified (see the [`skills`](crate::skills) module).

use super::{Client, RequestError, all_pages};
use crate::schema::{
    GetSkill, GetSkillRequestParams, ListSkills, ListSkillsResult, PaginatedRequestParams,
    ReadDirectory, ReadDirectoryRequestParams, ReadDirectoryResult, Resource, SKILLS_EXTENSION,
    SkillEntry, SkillResource, SkillsCapability,
};
use crate::skills::{
    LoadedSkill, SkillLoadError, check_entry, check_skill_md, contents_bytes, verify_bytes,
};

impl Client {
    /// The settings of the Skills extension the server declared (in its `initialize` or
    /// `server/discover` result); `None` when it did not declare the extension, or before
    /// the client knows the server's capabilities.
    pub fn skills_capability(&self) -> Option<SkillsCapability> {
        self.server_info()
            .and_then(|info| SkillsCapability::of(&info.capabilities))
    }

    /// The declared extension, or the error for a call that needs it.
    fn require_skills(&self) -> Result<SkillsCapability, RequestError> {
        self.skills_capability()
            .ok_or_else(|| RequestError::NotDeclared(format!("the {SKILLS_EXTENSION} extension")))
    }

    /// One page of `skills/list`. Not sent to a server that did not declare the extension
    /// ([`RequestError::NotDeclared`]).
    pub async fn list_skills_page(
        &self,
        cursor: Option<String>,
    ) -> Result<ListSkillsResult, RequestError> {
        self.require_skills()?;
        self.request::<ListSkills>(PaginatedRequestParams {
            cursor,
            ..PaginatedRequestParams::default()
        })
        .await
    }

    /// Every skill entry, following `nextCursor` for at most
    /// [`ClientBuilder::max_list_pages`](super::ClientBuilder::max_list_pages) pages
    /// ([`RequestError::TooManyPages`] beyond). Reads no skill file: an entry carries what a
    /// registry needs (name, description, the files' digests). An empty or short listing is
    /// not proof the server has no other skill ([`get_skill`](Self::get_skill) answers for
    /// any).
    pub async fn list_skills(&self) -> Result<Vec<SkillEntry>, RequestError> {
        all_pages(self.inner.max_list_pages, |cursor| async move {
            self.list_skills_page(cursor)
                .await
                .map(|p| (p.skills, p.next_cursor))
        })
        .await
    }

    /// `skills/get`: the entry of the skill whose `SKILL.md` is at `uri`, listed or not.
    /// Not sent to a server that did not declare the extension.
    pub async fn get_skill(&self, uri: &str) -> Result<SkillEntry, RequestError> {
        self.require_skills()?;
        self.request::<GetSkill>(GetSkillRequestParams {
            uri: uri.to_owned(),
            ..GetSkillRequestParams::default()
        })
        .await
        .map(|r| r.skill)
    }

    /// One page of `resources/directory/read`: the direct children of the directory `uri`.
    /// Not sent to a server that did not declare `directoryRead: true`.
    pub async fn read_directory_page(
        &self,
        uri: &str,
        cursor: Option<String>,
    ) -> Result<ReadDirectoryResult, RequestError> {
        if !self.require_skills()?.directory_read() {
            return Err(RequestError::NotDeclared(format!(
                "directoryRead in the {SKILLS_EXTENSION} extension"
            )));
        }
        self.request::<ReadDirectory>(ReadDirectoryRequestParams {
            uri: uri.to_owned(),
            cursor,
            ..ReadDirectoryRequestParams::default()
        })
        .await
    }

    /// Every direct child of the directory `uri` (files, and subdirectories with the MIME
    /// type `inode/directory`), following `nextCursor` for at most
    /// [`ClientBuilder::max_list_pages`](super::ClientBuilder::max_list_pages) pages.
    pub async fn read_directory(&self, uri: &str) -> Result<Vec<Resource>, RequestError> {
        all_pages(self.inner.max_list_pages, |cursor| async move {
            self.read_directory_page(uri, cursor)
                .await
                .map(|p| (p.resources, p.next_cursor))
        })
        .await
    }

    /// Loads the skill `entry` describes (from [`list_skills`](Self::list_skills) or
    /// [`get_skill`](Self::get_skill)): checks the entry (a file manifest listing `SKILL.md`,
    /// well-formed digests, the client's [`SkillLimits`](crate::skills::SkillLimits)), reads
    /// `SKILL.md` — only it: supporting files are read when needed, through
    /// [`read_skill_file`](Self::read_skill_file) — and verifies its size, its SHA-256
    /// digest and its frontmatter against the entry.
    ///
    /// # Errors
    ///
    /// A [`SkillLoadError`] naming the file: a mismatch, an entry that cannot be verified
    /// against, or the failed request. Nothing unverified is returned.
    pub async fn load_skill(&self, entry: &SkillEntry) -> Result<LoadedSkill, SkillLoadError> {
        self.require_skills()
            .map_err(|source| SkillLoadError::Request {
                uri: entry.uri.clone(),
                source: Box::new(source),
            })?;
        let limits = &self.inner.skill_limits;
        check_entry(entry, limits)?;
        let listed = entry
            .files()
            .and_then(|files| files.iter().find(|f| f.uri == entry.uri))
            .ok_or_else(|| SkillLoadError::Unlisted {
                uri: entry.uri.clone(),
            })?;
        let bytes = self.read_verified(listed).await?;
        let text = check_skill_md(entry, bytes, limits)?;
        Ok(LoadedSkill::new(entry.clone(), text))
    }

    /// Reads a file of a loaded skill — `reference` is a path relative to the skill's root
    /// (`references/FORMS.md`) or a URI — and verifies its size and digest against the
    /// entry the skill was loaded from. A file that entry does not list is refused without
    /// a request ([`SkillLoadError::Unlisted`]).
    pub async fn read_skill_file(
        &self,
        skill: &LoadedSkill,
        reference: &str,
    ) -> Result<Vec<u8>, SkillLoadError> {
        let uri = skill
            .resolve(reference)
            .ok_or_else(|| SkillLoadError::Unlisted {
                uri: reference.to_owned(),
            })?;
        let listed = skill.listed(&uri).ok_or(SkillLoadError::Unlisted { uri })?;
        self.read_verified(listed).await
    }

    /// `resources/read` of a listed file; its bytes, once they match the listing.
    async fn read_verified(&self, listed: &SkillResource) -> Result<Vec<u8>, SkillLoadError> {
        let result =
            self.read_resource(&listed.uri)
                .await
                .map_err(|source| SkillLoadError::Request {
                    uri: listed.uri.clone(),
                    source: Box::new(source),
                })?;
        let bytes = contents_bytes(&result.contents, &listed.uri)?;
        verify_bytes(listed, &bytes)?;
        Ok(bytes)
    }
}
