//! The example command-line client's runtime-neutral half, shared by `mcp-tokio`'s and
//! `mcp-smol`'s `examples/client.rs`: its arguments ([`Args`]), its connection options
//! ([`options`], [`oauth`]), the loopback redirect of `--oauth` ([`Redirect`]), and what it
//! prints ([`list_or_call`], [`render`]). Each example adds its runtime's part: the redirect
//! listener, Ctrl-C, and the HTTP client itself.

use std::future::Future;

use mcp_driver::{Connect, Engine, OAuth};
use mcp_proto::auth::{ClientMetadata, OAuthConfig};
use mcp_proto::client::ClientConfig;
use mcp_service::client::{Client, Notifications, ServerNotification};
use mcp_service::schema::ContentBlock;
use serde_json::Value;

/// The usage line.
pub const USAGE: &str =
    "usage: client <url> [<tool> [<json args>]] [--listen] [--token <bearer token> | --oauth]";

/// How the client authorizes its requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authorization {
    /// Not at all.
    None,
    /// `--token`: `Authorization: Bearer <token>` on every request.
    Token(String),
    /// `--oauth`: the OAuth 2.1 flow when the server asks for it (a 401).
    OAuth,
}

/// The command line: `<url> [<tool> [<json args>]] [--listen] [--token <token> | --oauth]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Args {
    /// The MCP endpoint.
    pub url: String,
    /// The tool to call; none lists the tools.
    pub tool: Option<String>,
    /// The tool's arguments (default `{}`).
    pub args: Value,
    /// `--listen`: keep a GET stream open and print the server's notifications.
    pub listen: bool,
    /// `--token` or `--oauth`.
    pub auth: Authorization,
}

impl Args {
    /// Parses the arguments after the program's name.
    ///
    /// # Errors
    ///
    /// The message to print (the usage line, or what is wrong) for bad usage or `--help`.
    pub fn parse(argv: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut listen = false;
        let mut auth = Authorization::None;
        let mut positional = Vec::new();
        let mut argv = argv.into_iter();
        while let Some(arg) = argv.next() {
            match arg.as_str() {
                "--listen" => listen = true,
                "--token" => {
                    auth = Authorization::Token(argv.next().ok_or("--token needs a token")?);
                }
                "--oauth" => auth = Authorization::OAuth,
                "-h" | "--help" => return Err(USAGE.to_owned()),
                _ => positional.push(arg),
            }
        }
        let mut positional = positional.into_iter();
        let url = positional.next().ok_or(USAGE)?;
        let tool = positional.next();
        let args = match positional.next() {
            Some(json) => {
                serde_json::from_str(&json).map_err(|e| format!("bad JSON arguments: {e}"))?
            }
            None => Value::Object(Default::default()),
        };
        if positional.next().is_some() {
            return Err(USAGE.to_owned());
        }
        Ok(Args {
            url,
            tool,
            args,
            listen,
            auth,
        })
    }
}

/// The options of `args` on `connect`: the client definition called `name`, continuous
/// listening for `--listen`, and the bearer token of `--token`. (`--oauth` needs the
/// runtime's redirect listener: add [`oauth`].)
pub fn options<E: Engine>(connect: Connect<E>, args: &Args, name: &str) -> Connect<E> {
    let definition = Client::builder(name, "0.1.0");
    let config = ClientConfig::new().with_continuous_listening(args.listen);
    let connect = connect.definition(definition).config(config);
    match &args.auth {
        Authorization::Token(token) => {
            let token = token.clone();
            connect.bearer_token_provider(move || Some(token.clone()))
        }
        Authorization::None | Authorization::OAuth => connect,
    }
}

/// The OAuth of `--oauth`: the authorization code grant for a client called `name`,
/// redirected to `redirect`. Each authorization URL is printed on stderr for a person to
/// open; then `take` waits for the redirect (on the runtime's listener) and returns its full
/// URL.
pub fn oauth<F, Fut>(name: &str, redirect: Redirect, take: F) -> OAuth
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<String, String>> + Send + 'static,
{
    let config = OAuthConfig::authorization_code(ClientMetadata::new(name), redirect.uri());
    OAuth::new(config).on_authorize(move |req| {
        eprintln!("authorize this client: open\n  {}\nin a browser", req.url);
        take()
    })
}

/// The loopback redirect of `--oauth`: `http://127.0.0.1:<port>/callback`, the port a
/// listener of the example's runtime holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redirect {
    port: u16,
}

/// The listener's answer to one request ([`Redirect::answer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status code: 200 for the callback, 404 for anything else.
    pub status: u16,
    /// The body, `text/plain; charset=utf-8`.
    pub body: &'static str,
    /// For the callback, the full redirect URL (what the OAuth flow takes); else `None`.
    pub redirect: Option<String>,
}

impl Redirect {
    /// The redirect to the listener on 127.0.0.1:`port`.
    pub fn new(port: u16) -> Redirect {
        Redirect { port }
    }

    /// `http://127.0.0.1:<port>/callback`.
    pub fn uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    /// The answer to a request for `target` (its path and query, as in the request line).
    pub fn answer(&self, target: &str) -> Answer {
        let path = target.split_once('?').map_or(target, |(path, _)| path);
        if path == "/callback" {
            Answer {
                status: 200,
                body: "Authorized: you may close this window.\n",
                redirect: Some(format!("http://127.0.0.1:{}{target}", self.port)),
            }
        } else {
            Answer {
                status: 404,
                body: "not found\n",
                redirect: None,
            }
        }
    }
}

/// Lists the tools (after the server's name, version and protocol), or calls `args.tool`
/// and prints its content, on stdout.
///
/// # Errors
///
/// The one-line error to print: the request failed, or the tool returned an error.
pub async fn list_or_call(client: &Client, args: &Args) -> Result<(), String> {
    let Some(tool) = &args.tool else {
        let tools = client
            .list_tools()
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        if let Some(info) = client.server_info() {
            println!(
                "{} {} (protocol {})",
                info.server_info.name, info.server_info.version, info.protocol_version
            );
        }
        for tool in tools {
            println!("{}\t{}", tool.name, tool.description.unwrap_or_default());
        }
        return Ok(());
    };
    let result = client
        .call_tool(tool, &args.args)
        .await
        .map_err(|e| format!("{tool} failed: {e}"))?;
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => println!("{}", t.text),
            other => println!("{}", serde_json::to_string(other).unwrap_or_default()),
        }
    }
    if result.is_error == Some(true) {
        return Err(format!("{tool} returned an error"));
    }
    Ok(())
}

/// Prints each notification as one line ([`render`]) until the stream ends.
pub async fn print_notifications(mut notifications: Notifications) {
    while let Some(n) = notifications.next().await {
        println!("{}", render(&n));
    }
}

/// One notification as one JSON line: `{"method": ..., "params": ...}`.
pub fn render(n: &ServerNotification) -> String {
    use mcp_service::schema::methods as m;
    let (method, params) = match n {
        ServerNotification::Progress(p) => (m::NOTIFICATION_PROGRESS, serde_json::to_value(p)),
        ServerNotification::Log(p) => (m::NOTIFICATION_MESSAGE, serde_json::to_value(p)),
        ServerNotification::ResourceUpdated(p) => {
            (m::NOTIFICATION_RESOURCES_UPDATED, serde_json::to_value(p))
        }
        ServerNotification::ResourceListChanged => {
            (m::NOTIFICATION_RESOURCES_LIST_CHANGED, Ok(Value::Null))
        }
        ServerNotification::ToolListChanged => {
            (m::NOTIFICATION_TOOLS_LIST_CHANGED, Ok(Value::Null))
        }
        ServerNotification::PromptListChanged => {
            (m::NOTIFICATION_PROMPTS_LIST_CHANGED, Ok(Value::Null))
        }
        ServerNotification::Cancelled(p) => (m::NOTIFICATION_CANCELLED, serde_json::to_value(p)),
        ServerNotification::ElicitationComplete(p) => (
            m::NOTIFICATION_ELICITATION_COMPLETE,
            serde_json::to_value(p),
        ),
        ServerNotification::Other(n) => (
            &*n.method,
            n.params
                .as_deref()
                .map_or(Ok(Value::Null), |raw| serde_json::from_str(raw.get())),
        ),
        other => return format!("{other:?}"),
    };
    let params = params.unwrap_or_else(|e| Value::String(format!("unprintable: {e}")));
    serde_json::json!({"method": method, "params": params}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(argv: &[&str]) -> Result<Args, String> {
        Args::parse(argv.iter().map(|s| s.to_string()))
    }

    #[test]
    fn flags_go_anywhere_and_positionals_keep_their_order() {
        let a = parse(&[
            "--listen",
            "http://x/mcp",
            "echo",
            "--token",
            "t0k",
            r#"{"a":1}"#,
        ])
        .unwrap();
        assert_eq!(a.url, "http://x/mcp");
        assert_eq!(a.tool.as_deref(), Some("echo"));
        assert_eq!(a.args, serde_json::json!({"a": 1}));
        assert!(a.listen);
        assert_eq!(a.auth, Authorization::Token("t0k".into()));
        let b = parse(&["http://x/mcp", "--oauth"]).unwrap();
        assert_eq!(b.auth, Authorization::OAuth);
        assert_eq!(b.tool, None);
        assert_eq!(b.args, serde_json::json!({}));
        assert!(!b.listen);
    }

    #[test]
    fn bad_usage_is_an_error() {
        assert_eq!(parse(&[]), Err(USAGE.to_owned()));
        assert_eq!(parse(&["--help"]), Err(USAGE.to_owned()));
        assert_eq!(parse(&["u", "t", "{}", "extra"]), Err(USAGE.to_owned()));
        assert_eq!(
            parse(&["u", "--token"]),
            Err("--token needs a token".to_owned())
        );
        let bad = parse(&["u", "t", "{nope"]).unwrap_err();
        assert!(bad.starts_with("bad JSON arguments"), "{bad}");
    }

    #[test]
    fn the_redirect_listener_takes_the_callback_alone() {
        let redirect = Redirect::new(4711);
        assert_eq!(redirect.uri(), "http://127.0.0.1:4711/callback");
        let hit = redirect.answer("/callback?code=c0de&state=s%20t");
        assert_eq!(hit.status, 200);
        assert_eq!(
            hit.redirect.as_deref(),
            Some("http://127.0.0.1:4711/callback?code=c0de&state=s%20t")
        );
        assert_eq!(redirect.answer("/callback").status, 200);
        for miss in [
            "/favicon.ico",
            "/callback/x",
            "/?/callback",
            "/callbackx?code=1",
        ] {
            let answer = redirect.answer(miss);
            assert_eq!((answer.status, answer.redirect), (404, None), "{miss}");
        }
    }

    #[test]
    fn notifications_render_as_one_json_line() {
        let line = render(&ServerNotification::ToolListChanged);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"method": "notifications/tools/list_changed", "params": null})
        );
    }
}
