//! The conformance client: the official suite (`@modelcontextprotocol/conformance`) runs it
//! against its mock servers, one process per scenario.
//!
//! ```text
//! mcp-conformance-client [--runtime tokio|smol] <url>
//! mcp-conformance-client --list
//! ```
//!
//! The runner appends the mock server's URL as the last argument and sets:
//!
//! - `MCP_CONFORMANCE_SCENARIO`: the scenario (see [`SCENARIOS`], or `--list`);
//! - `MCP_CONFORMANCE_PROTOCOL_VERSION` (default `2025-11-25`): the revision to speak. A
//!   legacy revision connects with `initialize` offering it; `2026-07-28` connects in the
//!   modern, sessionless era (`EraMode::Modern`: a `server/discover` probe, then per-request
//!   metadata, multi-round-trip requests instead of server→client requests);
//! - `MCP_CONFORMANCE_CONTEXT` (JSON, optional): scenario data, e.g. the tool calls of
//!   `http-custom-headers` or the credentials of an `auth/*` scenario.
//!
//! Everything goes through our client library (`mcp_tokio::Client` or `mcp_smol::Client`).
//! Exits 0 when the scenario's work is done, 1 with a one-line error otherwise (an unknown
//! scenario, and an `auth/*` scenario whose authorization fails, too), 2 on bad arguments
//! or environment.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use mcp_driver::{DpopKey, OAuth, PrivateKeyJwt};
use mcp_proto::auth::{ClientCredentials, ClientMetadata, IdentityProvider, OAuthConfig};
use mcp_proto::client::{ClientConfig, EraMode};
use mcp_proto::version::ProtocolVersion;
use mcp_service::Error;
use mcp_service::client::{Client as ServiceClient, ClientBuilder};
use mcp_service::schema::{
    CreateMessageResult, ElicitAction, ElicitRequestParams, ElicitResult, ElicitValue, Role, Root,
    SamplingMessageContentBlock, StopReason, TextContent, Tool,
};
use mcp_tests::auth_server::browser;
use mcp_tests::runtime::{Client as RtClient, Runtime};
use serde_json::{Map, Value, json};

/// Every scenario this client knows, with what it does. The `auth/*` scenarios are all
/// dispatched to [`run_auth_scenario`].
pub const SCENARIOS: &[(&str, &str)] = &[
    ("initialize", "initialize (or discover), tools/list"),
    (
        "tools_call",
        "tools/list, then tools/call add_numbers {a: 5, b: 10}",
    ),
    (
        "elicitation-sep1034-client-defaults",
        "calls the tool whose elicitation it accepts with the schema's defaults",
    ),
    (
        "sse-retry",
        "tools/call test_reconnection, resumed after the server closes the stream",
    ),
    (
        "request-metadata",
        "declares roots, sampling and elicitation; discover (retried at a supported version), tools/list",
    ),
    (
        "sep-2322-client-request-state",
        "the input-required tools; an unrelated call between two rounds",
    ),
    (
        "http-standard-headers",
        "lists and calls every tool, reads every resource, gets every prompt",
    ),
    (
        "http-custom-headers",
        "the context's tool calls (their x-mcp-header arguments become Mcp-Param headers)",
    ),
    (
        "http-invalid-tool-headers",
        "calls every tool tools/list kept (those with invalid x-mcp-header are dropped)",
    ),
    (
        "json-schema-ref-no-deref",
        "tools/list only (a $ref in a schema is never fetched)",
    ),
    (
        "json-schema-2020-12-preservation",
        "tools/list, then json_schema_echo with the schema as received",
    ),
    (
        "sep-2640-client-no-prefetch",
        "the skills registry: skills/list, no skill loaded (so no skill file read)",
    ),
    (
        "sep-2640-client-verify-digest",
        "skills/list, then loads each skill and reads its files, verified (a mismatch is refused)",
    ),
    (
        "sep-2640-client-verify-size",
        "as sep-2640-client-verify-digest",
    ),
    (
        "sep-2640-client-verify-frontmatter",
        "as sep-2640-client-verify-digest",
    ),
    (
        "auth/*",
        "OAuth 2.1 (the context's credentials, if any), then tools/list and tools/call test-tool",
    ),
];

const USAGE: &str = "usage: mcp-conformance-client [--runtime tokio|smol] <url>
       mcp-conformance-client --list
  --runtime   the adapter to connect with: tokio (default) or smol
  --list      print the scenarios this client knows
  <url>       the MCP endpoint (the conformance runner appends it)
  environment: MCP_CONFORMANCE_SCENARIO (the scenario), MCP_CONFORMANCE_PROTOCOL_VERSION
  (default 2025-11-25; 2026-07-28 selects the modern era), MCP_CONFORMANCE_CONTEXT (JSON)";

/// How long `close` may take before the process gives up on it.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

enum Command {
    Run(Runtime, String),
    List,
}

fn parse_args() -> Result<Command, String> {
    let mut runtime = "tokio".to_owned();
    let mut url = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runtime" => runtime = args.next().ok_or("--runtime needs a name")?,
            "--list" => return Ok(Command::List),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other if other.starts_with("--") => {
                return Err(format!("unknown argument {other:?}\n{USAGE}"));
            }
            other => {
                if url.replace(other.to_owned()).is_some() {
                    return Err(format!("more than one URL\n{USAGE}"));
                }
            }
        }
    }
    let runtime = runtime
        .parse()
        .map_err(|e: String| format!("{e}\n{USAGE}"))?;
    let url = url.ok_or_else(|| format!("missing the server URL\n{USAGE}"))?;
    Ok(Command::Run(runtime, url))
}

/// One scenario run: where, on which runtime, at which revision, with which data.
struct Run {
    rt: Runtime,
    url: String,
    version: ProtocolVersion,
    context: Value,
}

impl Run {
    /// The environment the runner set.
    fn from_env(rt: Runtime, url: String) -> Result<Run, String> {
        let version = match std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION") {
            Ok(v) if !v.is_empty() => ProtocolVersion::parse(&v).ok_or_else(|| {
                format!(
                    "MCP_CONFORMANCE_PROTOCOL_VERSION {v:?} is not a revision this client speaks"
                )
            })?,
            _ => ProtocolVersion::V2025_11_25,
        };
        let context = match std::env::var("MCP_CONFORMANCE_CONTEXT") {
            Ok(text) if !text.is_empty() => serde_json::from_str(&text)
                .map_err(|e| format!("MCP_CONFORMANCE_CONTEXT is not JSON: {e}"))?,
            _ => Value::Object(Map::new()),
        };
        Ok(Run {
            rt,
            url,
            version,
            context,
        })
    }

    fn is_modern(&self) -> bool {
        !self.version.has_sessions()
    }

    /// `builder` and `config` set for the run's revision: a legacy one is offered in
    /// `initialize`; the modern one selects the sessionless era.
    fn era(&self, builder: ClientBuilder, config: ClientConfig) -> (ClientBuilder, ClientConfig) {
        if self.is_modern() {
            (builder, config.with_era(EraMode::Modern))
        } else {
            (builder.protocol_version(self.version), config)
        }
    }

    /// Connects, runs `work`, and closes the session whatever `work` gave.
    async fn with_client<F, Fut>(
        &self,
        builder: ClientBuilder,
        config: ClientConfig,
        work: F,
    ) -> Result<(), String>
    where
        F: FnOnce(ServiceClient) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        let (builder, config) = self.era(builder, config);
        let client = self
            .rt
            .connect_with(&self.url, builder, config)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let outcome = work(client.client().clone()).await;
        let _ = self.rt.timeout(CLOSE_TIMEOUT, client.close()).await;
        outcome
    }
}

fn builder() -> ClientBuilder {
    ServiceClient::builder("mcp-conformance-client", env!("CARGO_PKG_VERSION"))
}

async fn list_tools(c: &ServiceClient) -> Result<Vec<Tool>, String> {
    c.list_tools()
        .await
        .map_err(|e| format!("tools/list failed: {e}"))
}

async fn call(c: &ServiceClient, name: &str, arguments: Value) -> Result<(), String> {
    let result = c
        .call_tool(name, arguments)
        .await
        .map_err(|e| format!("tools/call {name} failed: {e}"))?;
    if result.is_error == Some(true) {
        return Err(format!("tools/call {name} returned isError"));
    }
    Ok(())
}

/// Arguments for a tool the client knows nothing else about: each required property of its
/// input schema, given its `default` or a value of its type.
fn example_arguments(schema: &Map<String, Value>) -> Value {
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut args = Map::new();
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        let prop = properties.and_then(|p| p.get(name));
        args.insert(name.to_owned(), example_value(prop));
    }
    Value::Object(args)
}

fn example_value(prop: Option<&Value>) -> Value {
    let Some(prop) = prop else {
        return json!("example");
    };
    if let Some(v) = prop.get("default").or_else(|| prop.get("const")) {
        return v.clone();
    }
    if let Some(first) = prop
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    match prop.get("type").and_then(Value::as_str) {
        Some("integer" | "number") => json!(1),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        Some("object") => json!({}),
        Some("null") => Value::Null,
        _ => json!("example"),
    }
}

/// Accepts a form, each field given its schema's `default` (fields without one are left out
/// unless `fill` is set, then they get a value of their type).
fn accept_form(params: &ElicitRequestParams, fill: bool) -> Result<ElicitResult, Error> {
    let ElicitRequestParams::Form(form) = params else {
        return Err(Error::invalid_params("only form elicitation is supported"));
    };
    let mut content = BTreeMap::new();
    for (name, field) in &form.requested_schema.properties {
        let field = serde_json::to_value(field).map_err(Error::internal)?;
        let value = match field.get("default") {
            Some(default) => default.clone(),
            None if fill => example_value(Some(&field)),
            None => continue,
        };
        let value: ElicitValue = serde_json::from_value(value)
            .map_err(|e| Error::internal(format!("value of {name}: {e}")))?;
        content.insert(name.clone(), value);
    }
    Ok(ElicitResult {
        action: ElicitAction::Accept,
        content: Some(content),
        meta: None,
        extra: Default::default(),
    })
}

/// `initialize` (a `server/discover` probe in the modern era), `tools/list`, close.
async fn initialize(run: &Run) -> Result<(), String> {
    run.with_client(builder(), ClientConfig::new(), |c| async move {
        list_tools(&c).await.map(drop)
    })
    .await
}

/// `tools/list`, then `tools/call add_numbers {a: 5, b: 10}`.
async fn tools_call(run: &Run) -> Result<(), String> {
    run.with_client(builder(), ClientConfig::new(), |c| async move {
        let tools = list_tools(&c).await?;
        if !tools.iter().any(|t| t.name == "add_numbers") {
            return Err("tools/list has no add_numbers".to_owned());
        }
        call(&c, "add_numbers", json!({"a": 5, "b": 10})).await
    })
    .await
}

/// Declares elicitation, keeps the GET stream open, calls the tool; the server's
/// `elicitation/create` (on the GET stream) is accepted with the schema's defaults. The
/// scenario's server sends it on the GET stream only, and drops it when none is open yet, so
/// the tool is called once the stream has opened (bounded: the call is made anyway).
async fn elicitation_defaults(run: &Run) -> Result<(), String> {
    let builder = builder().elicitation_handler(|p| async move { accept_form(&p, false) });
    let config = ClientConfig::new().with_continuous_listening(!run.is_modern());
    let rt = run.rt;
    let modern = run.is_modern();
    run.with_client(builder, config, |c| async move {
        if !modern
            && rt
                .timeout(Duration::from_secs(10), c.listen_opened())
                .await
                .is_none()
        {
            eprintln!("the GET stream did not open within 10 s; calling anyway");
        }
        list_tools(&c).await?;
        call(&c, "test_client_elicitation_defaults", json!({})).await
    })
    .await
}

/// `tools/call test_reconnection`: the server closes the POST stream after its priming
/// event; the core resumes with GET + `Last-Event-ID` after the server's `retry`.
async fn sse_retry(run: &Run) -> Result<(), String> {
    run.with_client(builder(), ClientConfig::new(), |c| async move {
        list_tools(&c).await?;
        call(&c, "test_reconnection", json!({})).await
    })
    .await
}

/// A client with every capability a server may ask of (sampling, elicitation, roots), each
/// answered.
fn capable_builder() -> ClientBuilder {
    builder()
        .sampling_handler(|_| async {
            Ok(CreateMessageResult {
                role: Role::Assistant,
                content: SamplingMessageContentBlock::Text(TextContent::new(
                    "an answer from the conformance client",
                ))
                .into(),
                model: "conformance-model".into(),
                stop_reason: Some(StopReason::EndTurn),
                meta: None,
                extra: Default::default(),
            })
        })
        .elicitation_handler(|p| async move { accept_form(&p, true) })
        .roots(vec![Root {
            uri: "file:///conformance".into(),
            name: Some("conformance".into()),
            meta: None,
            extra: Default::default(),
        }])
}

/// Every request carries the modern `_meta` (protocol version, client info, all three
/// capabilities); the probe, refused with `UnsupportedProtocolVersionError`, is retried at a
/// version the server supports; then `tools/list`.
async fn request_metadata(run: &Run) -> Result<(), String> {
    run.with_client(capable_builder(), ClientConfig::new(), |c| async move {
        list_tools(&c).await.map(drop)
    })
    .await
}

/// The input-required tools: `test_mrtr_echo_state` (its `requestState` echoed; while its
/// round is pending, the elicitation handler calls `test_mrtr_unrelated`, which must carry
/// nothing of it), `test_mrtr_no_state` (no state, none sent back), and
/// `test_mrtr_no_result_type` (a result without `resultType` is complete).
async fn mrtr_request_state(run: &Run) -> Result<(), String> {
    let me: Arc<OnceLock<ServiceClient>> = Arc::new(OnceLock::new());
    let unrelated: Arc<OnceLock<Result<(), String>>> = Arc::new(OnceLock::new());
    let (me2, unrelated2) = (me.clone(), unrelated.clone());
    let builder = builder().elicitation_handler(move |p| {
        let (me, unrelated) = (me2.clone(), unrelated2.clone());
        async move {
            if unrelated.get().is_none()
                && let Some(c) = me.get()
            {
                let outcome = call(c, "test_mrtr_unrelated", json!({})).await;
                let _ = unrelated.set(outcome);
            }
            accept_form(&p, true)
        }
    });
    run.with_client(builder, ClientConfig::new(), |c| async move {
        let _ = me.set(c.clone());
        list_tools(&c).await?;
        call(&c, "test_mrtr_echo_state", json!({})).await?;
        match unrelated.get() {
            Some(outcome) => outcome.clone()?,
            None => return Err("test_mrtr_echo_state asked for no input".to_owned()),
        }
        call(&c, "test_mrtr_no_state", json!({})).await?;
        call(&c, "test_mrtr_no_result_type", json!({})).await
    })
    .await
}

/// Lists and calls every tool, reads every resource, gets every prompt: each request carries
/// `Mcp-Method`, and `Mcp-Name` where the method names something.
async fn standard_headers(run: &Run) -> Result<(), String> {
    run.with_client(builder(), ClientConfig::new(), |c| async move {
        for tool in list_tools(&c).await? {
            call(&c, &tool.name, example_arguments(&tool.input_schema)).await?;
        }
        let resources = c
            .list_resources()
            .await
            .map_err(|e| format!("resources/list failed: {e}"))?;
        for r in resources {
            c.read_resource(&r.uri)
                .await
                .map_err(|e| format!("resources/read {} failed: {e}", r.uri))?;
        }
        let prompts = c
            .list_prompts()
            .await
            .map_err(|e| format!("prompts/list failed: {e}"))?;
        for p in prompts {
            c.get_prompt(&p.name, std::iter::empty::<(String, String)>())
                .await
                .map_err(|e| format!("prompts/get {} failed: {e}", p.name))?;
        }
        Ok(())
    })
    .await
}

/// `tools/list` (the session learns the tools' `x-mcp-header` declarations), then each tool
/// call of the context's `toolCalls`.
async fn custom_headers(run: &Run) -> Result<(), String> {
    let calls: Vec<(String, Value)> = run
        .context
        .get("toolCalls")
        .and_then(Value::as_array)
        .ok_or("MCP_CONFORMANCE_CONTEXT has no toolCalls")?
        .iter()
        .map(|c| {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            let args = c.get("arguments").cloned().unwrap_or(json!({}));
            (name.to_owned(), args)
        })
        .collect();
    run.with_client(builder(), ClientConfig::new(), |c| async move {
        let tools = list_tools(&c).await?;
        for (name, args) in calls {
            if !tools.iter().any(|t| t.name == name) {
                return Err(format!("tools/list has no {name}"));
            }
            call(&c, &name, args).await?;
        }
        Ok(())
    })
    .await
}

/// Calls every tool `tools/list` kept: the session drops those whose `x-mcp-header`
/// declarations are invalid, so only valid ones are called.
async fn invalid_tool_headers(run: &Run) -> Result<(), String> {
    run.with_client(builder(), ClientConfig::new(), |c| async move {
        let tools = list_tools(&c).await?;
        if tools.is_empty() {
            return Err("tools/list kept no tool".to_owned());
        }
        for tool in tools {
            call(&c, &tool.name, example_arguments(&tool.input_schema)).await?;
        }
        Ok(())
    })
    .await
}

/// `tools/list` only: a network `$ref` in an input schema is kept as given, never fetched.
async fn ref_no_deref(run: &Run) -> Result<(), String> {
    run.with_client(builder(), ClientConfig::new(), |c| async move {
        list_tools(&c).await.map(drop)
    })
    .await
}

/// `tools/list`, then `json_schema_echo {schema: <json_schema_2020_12_tool's inputSchema as
/// received>}`: the scenario compares what comes back with what it sent.
async fn schema_preservation(run: &Run) -> Result<(), String> {
    run.with_client(builder(), ClientConfig::new(), |c| async move {
        let tools = list_tools(&c).await?;
        let focal = tools
            .iter()
            .find(|t| t.name == "json_schema_2020_12_tool")
            .ok_or("tools/list has no json_schema_2020_12_tool")?;
        let schema = Value::Object(focal.input_schema.clone());
        call(&c, "json_schema_echo", json!({ "schema": schema })).await
    })
    .await
}

/// The URL of this client's metadata document (its `client_id` where the authorization
/// server supports client ID metadata documents): the one the suite's scenarios expect.
const CLIENT_METADATA_DOCUMENT: &str = "https://conformance-test.local/client-metadata.json";

/// Where the authorization server redirects after consent. Nothing listens there: the
/// "browser" below reads the redirect instead of following it.
const REDIRECT_URI: &str = "http://localhost:3000/callback";

/// The Skills scenarios (the host side of SEP-2640): connects, checks that the server
/// declared the extension, and builds the skills registry from `skills/list` alone. With
/// `load`, the host then uses each skill: [`ServiceClient::load_skill`] reads its `SKILL.md`
/// and [`ServiceClient::read_skill_file`] each supporting file, the client library verifying
/// every one against the skill's entry (size, digest, frontmatter) and refusing a mismatch,
/// which ends the run with that error.
async fn skills(run: &Run, load: bool) -> Result<(), String> {
    run.with_client(builder(), ClientConfig::new(), |c| async move {
        if c.skills_capability().is_none() {
            return Err("the server did not declare the Skills extension".to_owned());
        }
        let entries = c
            .list_skills()
            .await
            .map_err(|e| format!("skills/list failed: {e}"))?;
        if !load {
            return Ok(());
        }
        for entry in &entries {
            let skill = c
                .load_skill(entry)
                .await
                .map_err(|e| format!("skill not loaded: {e}"))?;
            let supporting = entry.files().unwrap_or_default();
            for file in supporting.iter().filter(|f| f.uri != entry.uri) {
                c.read_skill_file(&skill, &file.uri)
                    .await
                    .map_err(|e| format!("skill file refused: {e}"))?;
            }
        }
        Ok(())
    })
    .await
}

/// The `auth/*` scenarios (OAuth 2.1 authorization: discovery, registration, PKCE, scopes,
/// tokens): `run.url` is the protected MCP endpoint, `run.context` carries the scenario's
/// pre-registered credentials, if any. The client connects with [`OAuth`] (the
/// authorization code grant; the client credentials grant for the `client-credentials-*`
/// scenarios, with `private_key_jwt` when the scenario hands over a key; the JWT bearer grant
/// with the scenario's workload token for `auth/wif-jwt-bearer`), then lists the tools and
/// calls `test-tool`. A scenario whose server must be
/// refused (a resource or issuer mismatch, a wrong `iss`, endless step-up) fails here with
/// the flow's error.
async fn run_auth_scenario(run: &Run, scenario: &str) -> Result<(), String> {
    let text = |key: &str| run.context.get(key).and_then(Value::as_str);
    let credentials = text("client_id").map(|id| {
        let creds = match text("client_secret") {
            Some(secret) => ClientCredentials::confidential(id, secret),
            None => ClientCredentials::public(id),
        };
        match text("issuer") {
            Some(issuer) => creds.for_issuer(issuer),
            None => creds,
        }
    });
    let metadata = ClientMetadata::new("mcp-conformance-client")
        .with_software("mcp-conformance-client", env!("CARGO_PKG_VERSION"));
    let config = if scenario.starts_with("auth/client-credentials") {
        let creds = credentials.ok_or("the scenario gave no client credentials")?;
        let config = OAuthConfig::client_credentials(metadata, creds);
        // `private_key_jwt` (RFC 7523 §2.2): the scenario hands over the client's key.
        match text("private_key_pem") {
            Some(pem) => {
                let alg = text("signing_algorithm").unwrap_or("ES256");
                let signer = PrivateKeyJwt::from_pem(alg, pem.as_bytes())
                    .map_err(|e| format!("the scenario's key: {e}"))?;
                config.with_assertion_signer(signer)
            }
            None => config,
        }
    } else if scenario == "auth/enterprise-managed-authorization" {
        // The person's IdP ID token, traded at the IdP for an ID-JAG, redeemed at the AS.
        let creds = credentials.ok_or("the scenario gave no client credentials")?;
        let endpoint = text("idp_token_endpoint").ok_or("the scenario gave no IdP")?;
        let id_token = text("idp_id_token")
            .ok_or("the scenario gave no ID token")?
            .to_owned();
        let mut idp = IdentityProvider::new(endpoint);
        if let Some(id) = text("idp_client_id") {
            idp = idp.with_client_id(id);
        }
        OAuthConfig::enterprise_managed(metadata, creds, idp, move || Ok(id_token.clone()))
    } else if scenario == "auth/wif-jwt-bearer" {
        // Workload identity federation: the platform's token is the JWT bearer assertion.
        let creds = credentials.ok_or("the scenario gave no client id")?;
        let jwt = text("valid_jwt")
            .ok_or("the scenario gave no workload token")?
            .to_owned();
        OAuthConfig::jwt_bearer(metadata, creds, move || Ok(jwt.clone()))
    } else {
        let config = OAuthConfig::authorization_code(metadata, REDIRECT_URI)
            .with_client_metadata_document(CLIENT_METADATA_DOCUMENT);
        match credentials {
            Some(creds) => config.with_credentials(creds),
            None => config,
        }
    };
    // DPoP (RFC 9449): tokens bound to a fresh key, proofs on every request.
    let config = if scenario.starts_with("auth/dpop") {
        let key = DpopKey::generate().map_err(|e| format!("a DPoP key: {e}"))?;
        config.with_dpop(key)
    } else {
        config
    };
    let oauth = OAuth::new(config).on_authorize(|req| browser(req.url));
    let (builder, config) = run.era(builder(), ClientConfig::new());
    let client = match run.rt {
        Runtime::Tokio => mcp_tokio::Client::builder(&run.url)
            .definition(builder)
            .config(config)
            .oauth(oauth)
            .connect()
            .await
            .map(RtClient::Tokio),
        Runtime::Smol => mcp_smol::Client::builder(&run.url)
            .definition(builder)
            .config(config)
            .oauth(oauth)
            .connect()
            .await
            .map(RtClient::Smol),
    }
    .map_err(|e| format!("connect: {e}"))?;
    let outcome = async {
        list_tools(&client).await?;
        call(&client, "test-tool", json!({})).await
    }
    .await;
    let _ = run.rt.timeout(CLOSE_TIMEOUT, client.close()).await;
    outcome
}

async fn run_scenario(run: &Run, scenario: &str) -> Result<(), String> {
    match scenario {
        s if s.starts_with("auth/") => run_auth_scenario(run, s).await,
        "initialize" => initialize(run).await,
        "tools_call" => tools_call(run).await,
        "elicitation-sep1034-client-defaults" => elicitation_defaults(run).await,
        "sse-retry" => sse_retry(run).await,
        "request-metadata" => request_metadata(run).await,
        "sep-2322-client-request-state" => mrtr_request_state(run).await,
        "http-standard-headers" => standard_headers(run).await,
        "http-custom-headers" => custom_headers(run).await,
        "http-invalid-tool-headers" => invalid_tool_headers(run).await,
        "json-schema-ref-no-deref" => ref_no_deref(run).await,
        "json-schema-2020-12-preservation" => schema_preservation(run).await,
        "sep-2640-client-no-prefetch" => skills(run, false).await,
        "sep-2640-client-verify-digest"
        | "sep-2640-client-verify-size"
        | "sep-2640-client-verify-frontmatter" => skills(run, true).await,
        "" => Err("MCP_CONFORMANCE_SCENARIO is not set".to_owned()),
        other => Err(format!("unknown scenario {other:?}")),
    }
}

fn main() -> ExitCode {
    let (rt, url) = match parse_args() {
        Ok(Command::Run(rt, url)) => (rt, url),
        Ok(Command::List) => {
            for (name, what) in SCENARIOS {
                println!("{name}\t{what}");
            }
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let run = match Run::from_env(rt, url) {
        Ok(run) => run,
        Err(e) => {
            eprintln!("mcp-conformance-client: {e}");
            return ExitCode::from(2);
        }
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let outcome = rt.block_on(async { run_scenario(&run, &scenario).await });
    match outcome {
        Ok(()) => {
            println!("{scenario} ({}): ok", run.version.as_str());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mcp-conformance-client: {scenario}: {e}");
            ExitCode::FAILURE
        }
    }
}
