//! The Skills extension (SEP-2640) end to end over loopback HTTP, on each runtime and in each
//! era: the everything server's skill discovered from the capabilities, listed, got by URI,
//! loaded (its `SKILL.md` verified) and its supporting file read (verified), and its
//! directories read. Every await is bounded.

use std::time::Duration;

use mcp_proto::client::{ClientConfig, EraMode};
use mcp_proto::server::ServerConfig;
use mcp_service::client::Client as ServiceClient;
use mcp_service::schema::{CacheScope, DIRECTORY_MIME_TYPE};
use mcp_tests::everything;
use mcp_tests::runtime::Runtime;

/// Generous for a loaded 2-core machine; a healthy run takes well under a second.
const LIMIT: Duration = Duration::from_secs(20);

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

async fn skills_over(rt: Runtime, era: EraMode) {
    let serving = bounded(
        "serve",
        rt.serve(everything::server(), ServerConfig::default()),
    )
    .await
    .expect("serve");
    let client = bounded(
        "connect",
        rt.connect_with(
            serving.url(),
            ServiceClient::builder("skills-e2e", "1"),
            ClientConfig::new().with_era(era),
        ),
    )
    .await
    .expect("connect");
    let modern = era == EraMode::Modern;
    assert_eq!(
        client.protocol_version().is_some_and(|v| !v.has_sessions()),
        modern,
        "the era reached"
    );
    let caps = client
        .skills_capability()
        .expect("the extension is declared");
    assert!(caps.directory_read());

    let page = bounded("skills/list", client.list_skills_page(None))
        .await
        .expect("skills/list");
    assert_eq!(page.skills, [everything::pdf_skill().entry().clone()]);
    assert_eq!(
        page.cache_scope,
        modern.then_some(CacheScope::Private),
        "cache attributes in 2026-07-28 only"
    );
    let uri = "skill://pdf-processing/SKILL.md";
    let entry = bounded("skills/get", client.get_skill(uri))
        .await
        .expect("skills/get");
    assert_eq!(entry, page.skills[0]);

    let skill = bounded("load", client.load_skill(&entry))
        .await
        .expect("the skill loads");
    assert!(skill.skill_md().starts_with("---\nname: pdf-processing\n"));
    let forms = bounded(
        "read",
        client.read_skill_file(&skill, "references/FORMS.md"),
    )
    .await
    .expect("the file verifies");
    assert!(forms.starts_with(b"# Forms"));

    let root = bounded("directory", client.read_directory("skill://pdf-processing"))
        .await
        .expect("resources/directory/read");
    let dirs: Vec<&str> = root
        .iter()
        .filter(|r| r.mime_type.as_deref() == Some(DIRECTORY_MIME_TYPE))
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(dirs, ["references", "scripts"]);
    let e = bounded("directory", client.read_directory(uri))
        .await
        .expect_err("SKILL.md is no directory");
    assert_eq!(
        e.code(),
        Some(mcp_proto::jsonrpc::error_codes::INVALID_PARAMS)
    );

    bounded("close", client.close()).await;
    bounded("shutdown", serving.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_legacy_tokio() {
    skills_over(Runtime::Tokio, EraMode::Legacy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_modern_tokio() {
    skills_over(Runtime::Tokio, EraMode::Modern).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_legacy_smol() {
    skills_over(Runtime::Smol, EraMode::Legacy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_modern_smol() {
    skills_over(Runtime::Smol, EraMode::Modern).await;
}

/// An application depending on one adapter reaches the whole Skills API through it: the
/// skill it serves, the server method, the client's calls (through `Deref`) and their types.
#[test]
fn each_adapter_reexports_the_skills_api() {
    let skill: mcp_tokio::service::Skill = everything::pdf_skill();
    let server = mcp_smol::service::Server::new("s", "1").skill(skill);
    let entry: mcp_smol::service::schema::SkillEntry = server.skill_entries().remove(0);
    let limits = mcp_tokio::service::skills::SkillLimits::default();
    assert_eq!(limits, mcp_smol::service::skills::SkillLimits::default());
    // The adapters' clients are the service client (their methods, by `Deref`).
    fn loads(
        c: &mcp_tokio::Client,
        e: &mcp_tokio::service::schema::SkillEntry,
    ) -> impl Future<
        Output = Result<
            mcp_tokio::service::skills::LoadedSkill,
            mcp_smol::service::skills::SkillLoadError,
        >,
    > {
        c.load_skill(e)
    }
    let _ = (loads, entry);
}
