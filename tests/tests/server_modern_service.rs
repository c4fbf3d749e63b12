//! The service layer on a router serving both eras, over raw HTTP inputs: one handler
//! serves MRTR to a modern client and a real JSON-RPC request to a legacy one (S-NEW-5),
//! `server/discover` (S-NEW-4), `subscriptions/listen` (S-NEW-9), cancellation by closing
//! (S-NEW-6), `Mcp-Param-*` from the tools' `x-mcp-header` (S-NEW-8), and no cross-talk
//! between sessionless requests that reuse an id.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use http::StatusCode;
use mcp_proto::server::{AuthDecision, ExchangeId, RequestHead, ServerConfig, ServerOutput};
use mcp_proto::{jsonrpc::Notification, mirror};
use mcp_service::bind::{Routed, ServerBinding};
use mcp_service::schema::{Elicit, ElicitRequestParams, ListRoots, RequestParams};
use mcp_service::server::seal::StateKeys;
use mcp_service::{CallToolResult, Server, Tool};
use mcp_tests::exec::Executor;
use mcp_tests::server_harness::{AppEvent, Harness, Req, raw};
use serde_json::{Value, json};

const V: &str = "2026-07-28";

/// Router + the production [`ServerBinding`] + the test executor, fed raw HTTP.
struct Svc {
    h: Harness,
    exec: Executor,
    binding: ServerBinding,
}

impl Svc {
    fn new(server: &Server) -> Svc {
        Svc::with_config(server, ServerConfig::default().with_modern())
    }

    fn with_config(server: &Server, config: ServerConfig) -> Svc {
        let exec = Executor::new();
        let timer = exec.clone();
        let binding = ServerBinding::new(
            server.clone(),
            Arc::new(move |d| Box::pin(timer.sleep(d))),
            Arc::new(|| {}),
        );
        let mut svc = Svc {
            h: Harness::new(config),
            exec,
            binding,
        };
        svc.settle();
        svc
    }

    /// Moves everything until nothing moves (bounded).
    fn settle(&mut self) {
        for _ in 0..200 {
            let mut moved = false;
            while let Some(ev) = self.h.app.pop_front() {
                moved = true;
                let out = match ev {
                    AppEvent::Request {
                        handle,
                        session,
                        request,
                        principal,
                    } => ServerOutput::Request {
                        handle,
                        session,
                        request,
                        principal,
                    },
                    AppEvent::Notification {
                        session,
                        notification,
                    } => ServerOutput::Notification {
                        session,
                        notification,
                    },
                    AppEvent::Other(o) => o,
                };
                if let Routed::Spawn(f) = self.binding.handle_output(out) {
                    self.exec.spawn(f);
                }
            }
            if self.exec.has_ready() {
                moved = true;
                self.exec.run_ready();
            }
            if self.binding.apply(&mut self.h.router, self.h.now) {
                moved = true;
            }
            self.h.pump();
            if !moved && self.h.app.is_empty() {
                return;
            }
        }
        panic!("the service never settled");
    }

    fn send(&mut self, req: Req) -> ExchangeId {
        let s = self.h.send(req);
        self.settle();
        s
    }

    fn json(&self, s: ExchangeId) -> Value {
        let r = self.h.response(s);
        if r.is_sse() {
            r.sse_messages().last().cloned().expect("an SSE message")
        } else {
            r.json()
        }
    }
}

fn meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": caps
    })
}

fn modern(id: i64, method: &str, mut params: Value, caps: Value) -> Req {
    params["_meta"] = meta(caps);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut req = Req::post(&body.to_string()).version(V);
    for (name, value) in mirror::mirror_headers(method, Some(&raw(&params.to_string()))) {
        req.headers.insert(name, value);
    }
    req
}

fn ask_name() -> ElicitRequestParams {
    serde_json::from_value(json!({
        "mode": "form",
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
    }))
    .unwrap()
}

/// One handler, both eras: asks the client (elicitation) and greets with the answer.
fn greeter(runs: Arc<AtomicUsize>) -> Server {
    Server::new("greeter", "1").tool(Tool::new("greet"), move |ctx, _| {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            let answer = ctx.send_request::<Elicit>(ask_name()).await?;
            let name = answer
                .content
                .as_ref()
                .and_then(|c| c.get("name"))
                .and_then(|v| serde_json::to_value(v).ok())
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| "nobody".to_owned());
            Ok(CallToolResult::text(format!("hello {name}")))
        }
    })
}

fn text_of(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[test]
fn s_new_5_one_handler_serves_mrtr_to_a_modern_client() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut svc = Svc::new(&greeter(runs.clone()));
    let caps = json!({"elicitation": {}});
    let s = svc.send(modern(
        1,
        "tools/call",
        json!({"name": "greet"}),
        caps.clone(),
    ));
    let r = svc.json(s);
    assert_eq!(svc.h.response(s).status(), StatusCode::OK);
    assert_eq!(r["id"], 1);
    let result = &r["result"];
    assert_eq!(result["resultType"], "input_required");
    let requests = result["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1);
    let (key, input) = requests.iter().next().unwrap();
    assert_eq!(input["method"], "elicitation/create");
    assert_eq!(input["params"]["message"], "Your name?");
    let state = result["requestState"].as_str().unwrap().to_owned();
    // No JSON-RPC request ever went to the modern client.
    assert!(
        !svc.h
            .response(s)
            .messages()
            .iter()
            .any(|m| m.get("method").is_some())
    );
    // The retry (new id) with the answer and the state completes.
    let retry = json!({
        "name": "greet",
        "inputResponses": {key.as_str(): {"action": "accept", "content": {"name": "Ada"}}},
        "requestState": state,
    });
    let s = svc.send(modern(2, "tools/call", retry, caps));
    let r = svc.json(s);
    assert_eq!(r["id"], 2);
    assert_eq!(text_of(&r), "hello Ada");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "re-run with the answer available"
    );
}

#[test]
fn s_new_5_the_same_handler_sends_a_real_request_to_a_legacy_client() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut svc = Svc::new(&greeter(runs.clone()));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "legacy", "version": "1"}}});
    let s = svc.send(Req::post(&init.to_string()));
    let sid = svc
        .h
        .response(s)
        .header("mcp-session-id")
        .unwrap()
        .to_owned();
    assert_eq!(svc.json(s)["result"]["protocolVersion"], "2025-11-25");
    svc.send(
        Req::post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .session(&sid)
            .version("2025-11-25"),
    );
    let call =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "greet"}});
    let s = svc.send(
        Req::post(&call.to_string())
            .session(&sid)
            .version("2025-11-25"),
    );
    let msgs = svc.h.response(s).sse_messages();
    let ask = msgs
        .iter()
        .find(|m| m["method"] == "elicitation/create")
        .expect("a real elicitation/create request on the stream");
    assert_eq!(ask["params"]["message"], "Your name?");
    let answer = json!({"jsonrpc": "2.0", "id": ask["id"],
        "result": {"action": "accept", "content": {"name": "Grace"}}});
    let a = svc.send(
        Req::post(&answer.to_string())
            .session(&sid)
            .version("2025-11-25"),
    );
    assert_eq!(svc.h.response(a).status(), StatusCode::ACCEPTED);
    let r = svc.json(s);
    assert_eq!(r["id"], 2);
    assert_eq!(text_of(&r), "hello Grace");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "legacy: one run");
}

#[test]
fn mrtr_rounds_accumulate_answers_and_are_bounded() {
    let server = |max| {
        Server::new("two", "1")
            .max_input_rounds(max)
            .tool(Tool::new("two"), |ctx, _| async move {
                let roots = ctx
                    .send_request::<ListRoots>(RequestParams::default())
                    .await?;
                let who = ctx.send_request::<Elicit>(ask_name()).await?;
                Ok(CallToolResult::text(format!(
                    "{} roots, {:?}",
                    roots.roots.len(),
                    who.action
                )))
            })
    };
    let caps = json!({"elicitation": {}, "roots": {}});
    let mut svc = Svc::new(&server(8));
    let s = svc.send(modern(
        1,
        "tools/call",
        json!({"name": "two"}),
        caps.clone(),
    ));
    let r1 = svc.json(s)["result"].clone();
    assert_eq!(
        r1["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["0:roots/list"]
    );
    let retry = json!({"name": "two", "requestState": r1["requestState"],
        "inputResponses": {"0:roots/list": {"roots": [{"uri": "file:///a"}]}}});
    let s = svc.send(modern(2, "tools/call", retry, caps.clone()));
    let r2 = svc.json(s)["result"].clone();
    assert_eq!(
        r2["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["1:elicitation/create"],
        "the first answer is carried in requestState, not asked again"
    );
    let retry = json!({"name": "two", "requestState": r2["requestState"],
        "inputResponses": {"1:elicitation/create": {"action": "decline"}}});
    let s = svc.send(modern(3, "tools/call", retry, caps.clone()));
    assert_eq!(text_of(&svc.json(s)), "1 roots, Decline");
    // With one round allowed, the second ask fails instead (a tool error).
    let mut svc = Svc::new(&server(1));
    let s = svc.send(modern(
        1,
        "tools/call",
        json!({"name": "two"}),
        caps.clone(),
    ));
    let r1 = svc.json(s)["result"].clone();
    let retry = json!({"name": "two", "requestState": r1["requestState"],
        "inputResponses": {"0:roots/list": {"roots": []}}});
    let s = svc.send(modern(2, "tools/call", retry, caps));
    let r = svc.json(s);
    assert_eq!(r["result"]["isError"], true, "{r}");
    // A state replayed on another tool call is refused.
    let other = json!({"name": "other", "requestState": r1["requestState"]});
    let s = svc.send(modern(3, "tools/call", other, json!({})));
    assert_eq!(svc.json(s)["error"]["code"], -32602);
}

/// Principals from `Authorization: Bearer <name>`.
fn by_bearer() -> ServerConfig {
    ServerConfig::default()
        .with_modern()
        .with_authenticator(|head: &RequestHead<'_>| {
            match head
                .headers
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
            {
                Some(who) => AuthDecision::allow(who),
                None => AuthDecision::unauthorized(),
            }
        })
}

fn as_user(mut req: Req, who: &str) -> Req {
    req.headers.insert(
        http::header::AUTHORIZATION,
        http::HeaderValue::from_str(&format!("Bearer {who}")).unwrap(),
    );
    req
}

#[test]
fn request_state_is_sealed_shared_by_instances_and_bound_to_the_principal() {
    let runs = Arc::new(AtomicUsize::new(0));
    let shared = || StateKeys::new([5u8; 32]).unwrap();
    let mut a = Svc::with_config(
        &greeter(runs.clone()).request_state_keys(shared()),
        by_bearer(),
    );
    let mut b = Svc::with_config(
        &greeter(runs.clone()).request_state_keys(shared()),
        by_bearer(),
    );
    // Another deployment: its own (default, random) key.
    let mut c = Svc::with_config(&greeter(runs.clone()), by_bearer());
    let caps = json!({"elicitation": {}});
    let s = a.send(as_user(
        modern(1, "tools/call", json!({"name": "greet"}), caps.clone()),
        "alice",
    ));
    let state = a.json(s)["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(state.starts_with("v1."), "{state}");
    let answer = json!({"action": "accept", "content": {"name": "Ada"}});
    let retry = |state: &str| {
        json!({"name": "greet", "requestState": state,
            "inputResponses": {"0:elicitation/create": answer.clone()}})
    };
    // Another principal, or another deployment's key: refused before the handler runs.
    let before = runs.load(Ordering::SeqCst);
    for (svc, who) in [(&mut b, "mallory"), (&mut c, "alice")] {
        let s = svc.send(as_user(
            modern(2, "tools/call", retry(&state), caps.clone()),
            who,
        ));
        let r = svc.json(s);
        assert_eq!(r["error"]["code"], -32602, "{who}: {r}");
    }
    // A state whose payload was edited (the tag kept) is refused too.
    let (body, tag) = state[3..].split_once('.').unwrap();
    let forged = format!("v1.{body}A.{tag}");
    let s = b.send(as_user(
        modern(3, "tools/call", retry(&forged), caps.clone()),
        "alice",
    ));
    assert_eq!(b.json(s)["error"]["code"], -32602);
    assert_eq!(runs.load(Ordering::SeqCst), before, "no handler ran");
    // The same principal on another instance sharing the key: the retry completes there.
    let s = b.send(as_user(
        modern(4, "tools/call", retry(&state), caps.clone()),
        "alice",
    ));
    assert_eq!(text_of(&b.json(s)), "hello Ada");
}

#[test]
fn mrtr_never_asks_what_the_client_did_not_declare() {
    let mut svc = Svc::new(&greeter(Arc::new(AtomicUsize::new(0))));
    let s = svc.send(modern(1, "tools/call", json!({"name": "greet"}), json!({})));
    let r = svc.json(s);
    assert!(r.get("result").is_none(), "{r}");
    assert_eq!(svc.h.response(s).status(), StatusCode::BAD_REQUEST);
    assert_eq!(r["error"]["code"], -32021);
    assert_eq!(
        r["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}})
    );
}

#[test]
fn s_new_4_server_discover_is_answered() {
    let mut svc = Svc::new(&greeter(Arc::new(AtomicUsize::new(0))));
    let s = svc.send(modern(1, "server/discover", json!({}), json!({})));
    let r = svc.json(s);
    assert!(svc.h.response(s).header("mcp-session-id").is_none());
    assert_eq!(r["result"]["supportedVersions"][0], V);
    assert_eq!(
        r["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "greeter"
    );
    assert!(r["result"]["capabilities"]["tools"].is_object());
}

/// `ping` is gone from 2026-07-28, but the official Python SDK and fastmcp still send it
/// (with the modern `_meta` and headers): it is answered with an empty result, `{}`.
#[test]
fn a_modern_ping_is_answered_with_an_empty_result_when_accepted() {
    let mut svc = Svc::with_config(
        &greeter(Arc::new(AtomicUsize::new(0))),
        ServerConfig::default().with_modern().with_modern_ping(true),
    );
    let s = svc.send(modern(4, "ping", json!({}), json!({})));
    assert_eq!(svc.h.response(s).status(), StatusCode::OK);
    let r = svc.json(s);
    assert_eq!(r["id"], 4, "{r}");
    assert_eq!(r["result"], json!({}), "{r}");
    assert!(svc.h.response(s).header("mcp-session-id").is_none());
}

/// A tool round that needs input carries an empty `content` (mcp-go's client reads every
/// `tools/call` result as a `CallToolResult` and requires the member).
#[test]
fn an_input_required_tool_result_carries_empty_content() {
    let mut svc = Svc::new(&greeter(Arc::new(AtomicUsize::new(0))));
    let s = svc.send(modern(
        1,
        "tools/call",
        json!({"name": "greet"}),
        json!({"elicitation": {}}),
    ));
    let result = &svc.json(s)["result"];
    assert_eq!(result["resultType"], "input_required", "{result}");
    assert_eq!(result["content"], json!([]), "{result}");
}

#[test]
fn s_new_9_unknown_method_is_404_through_the_service() {
    let mut svc = Svc::new(&greeter(Arc::new(AtomicUsize::new(0))));
    let s = svc.send(modern(1, "no/such", json!({}), json!({})));
    assert_eq!(svc.h.response(s).status(), StatusCode::NOT_FOUND);
    assert_eq!(svc.json(s)["error"]["code"], -32601);
}

#[test]
fn s_new_9_subscriptions_listen_streams_list_changes_until_closed() {
    let server = Server::new("l", "1").tool(Tool::new("a"), |_, _| async {
        Ok(CallToolResult::text("a"))
    });
    let mut svc = Svc::new(&server);
    let s = svc.send(modern(
        7,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
        json!({}),
    ));
    let msgs = svc.h.response(s).sse_messages();
    assert_eq!(
        msgs[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
    assert_eq!(
        msgs[0]["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    assert_eq!(
        msgs[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    assert_eq!(server.listener_count(), 1);
    server.add_tool(Tool::new("b"), |_, _| async {
        Ok(CallToolResult::text("b"))
    });
    svc.settle();
    let msgs = svc.h.response(s).sse_messages();
    let changed = msgs.last().unwrap();
    assert_eq!(changed["method"], "notifications/tools/list_changed");
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    assert!(!svc.h.response(s).ended);
    // Closing the stream cancels the listen handler and unregisters it (S-NEW-6).
    svc.h.router.handle_disconnect(svc.h.now, s);
    svc.h.pump();
    svc.settle();
    assert_eq!(server.listener_count(), 0);
    let before = svc.h.response(s).body.len();
    server.add_tool(Tool::new("c"), |_, _| async {
        Ok(CallToolResult::text("c"))
    });
    svc.settle();
    assert_eq!(svc.h.response(s).body.len(), before);
}

#[test]
fn s_new_8_mcp_param_headers_follow_the_tools_x_mcp_header() {
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}, "query": {"type": "string"}}});
    let server = Server::new("sql", "1").tool(
        Tool::with_schema("execute_sql", schema.as_object().unwrap().clone()),
        |_, _| async { Ok(CallToolResult::text("rows")) },
    );
    let mut svc = Svc::new(&server);
    let params = json!({"name": "execute_sql", "arguments": {"region": "us-west1", "query": "q"}});
    let s = svc.send(modern(1, "tools/call", params.clone(), json!({})));
    assert_eq!(svc.h.response(s).status(), StatusCode::BAD_REQUEST);
    assert_eq!(svc.json(s)["error"]["code"], -32020);
    let s =
        svc.send(modern(2, "tools/call", params, json!({})).header("mcp-param-region", "us-west1"));
    assert_eq!(text_of(&svc.json(s)), "rows");
    // A tool added at runtime: the binding hands the router a new table of declarations.
    let zone = json!({"type": "object", "properties": {
        "zone": {"type": "string", "x-mcp-header": "Zone"}}});
    server.add_tool(
        Tool::with_schema("scan", zone.as_object().unwrap().clone()),
        |_, _| async { Ok(CallToolResult::text("scanned")) },
    );
    svc.settle();
    let params = json!({"name": "scan", "arguments": {"zone": "z1"}});
    let s = svc.send(modern(3, "tools/call", params.clone(), json!({})));
    assert_eq!(
        svc.json(s)["error"]["code"],
        -32020,
        "the new tool's header is checked"
    );
    let s = svc.send(modern(4, "tools/call", params, json!({})).header("mcp-param-zone", "z1"));
    assert_eq!(text_of(&svc.json(s)), "scanned");
}

#[test]
fn sessionless_requests_with_the_same_id_do_not_cross_talk() {
    let server = Server::new("p", "1").tool(Tool::new("tag"), |ctx, args| async move {
        let tag = args.get_string("tag", "");
        let n = Notification::new(
            "notifications/message",
            Some(raw(&json!({"level": "info", "data": tag}).to_string())),
        );
        let _ = ctx.notify(n);
        ctx.sleep(std::time::Duration::from_millis(1)).await;
        Ok(CallToolResult::text(tag))
    });
    let mut svc = Svc::new(&server);
    let a = svc.h.send(modern(
        1,
        "tools/call",
        json!({"name": "tag", "arguments": {"tag": "A"}}),
        json!({}),
    ));
    let b = svc.h.send(modern(
        1,
        "tools/call",
        json!({"name": "tag", "arguments": {"tag": "B"}}),
        json!({}),
    ));
    svc.settle();
    svc.exec.advance();
    svc.settle();
    for (s, tag) in [(a, "A"), (b, "B")] {
        let msgs = svc.h.response(s).sse_messages();
        assert_eq!(msgs.len(), 2, "{tag}: {msgs:?}");
        assert_eq!(msgs[0]["params"]["data"], tag);
        assert_eq!(text_of(&msgs[1]), tag);
    }
}

#[test]
fn s_new_9_listen_stream_carries_resource_updates_it_subscribed_to() {
    let resource = mcp_service::schema::Resource {
        uri: "file:///r".into(),
        name: "r".into(),
        ..Default::default()
    };
    let server = Server::new("r", "1").resource(resource, |_, _| async { Ok(Vec::new()) });
    let mut svc = Svc::new(&server);
    let s = svc.send(modern(
        3,
        "subscriptions/listen",
        json!({"notifications": {"resourceSubscriptions": ["file:///r"]}}),
        json!({}),
    ));
    let ack = &svc.h.response(s).sse_messages()[0];
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(["file:///r"])
    );
    assert_eq!(server.notify_resource_updated("file:///other"), 0);
    assert_eq!(server.notify_resource_updated("file:///r"), 1);
    svc.settle();
    let msgs = svc.h.response(s).sse_messages();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert_eq!(msgs[1]["method"], "notifications/resources/updated");
    assert_eq!(msgs[1]["params"]["uri"], "file:///r");
    assert_eq!(
        msgs[1]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        3
    );
}

#[path = "schema_support/mod.rs"]
mod schema_support;

/// Results to a modern client carry what 2026-07-28 requires and the legacy shapes lack
/// (`resultType`; `cacheScope` + `ttlMs` on cacheable results), and validate against the
/// official 2026-07-28 schema; the same requests from a legacy client stay legacy-shaped.
#[test]
fn modern_results_validate_against_the_2026_07_28_schema() {
    let server = mcp_tests::everything::server();
    let mut svc = Svc::new(&server);
    let caps = json!({"sampling": {}, "elicitation": {}});
    let cases = [
        ("server/discover", json!({}), "DiscoverResult"),
        ("tools/list", json!({}), "ListToolsResult"),
        ("prompts/list", json!({}), "ListPromptsResult"),
        ("resources/list", json!({}), "ListResourcesResult"),
        (
            "resources/templates/list",
            json!({}),
            "ListResourceTemplatesResult",
        ),
        (
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
            "CallToolResult",
        ),
    ];
    let Some(spec) = schema_support::spec_data("modern_results_validate") else {
        return;
    };
    let revision = schema_support::Revision::load(&spec, "2026-07-28");
    for (i, (method, params, def)) in cases.into_iter().enumerate() {
        let id = i64::try_from(i).unwrap() + 1;
        let s = svc.send(modern(id, method, params, caps.clone()));
        let r = svc.json(s);
        let result = &r["result"];
        assert_eq!(result["resultType"], "complete", "{method}: {r}");
        if def != "CallToolResult" {
            assert_eq!(result["cacheScope"], "private", "{method}: {r}");
            assert_eq!(result["ttlMs"], 0, "{method}: {r}");
        }
        revision
            .check(def, result)
            .unwrap_or_else(|e| panic!("{method} answer is not a valid {def}: {e}\n{r}"));
    }
    // The server's own hint replaces the default.
    let server = mcp_tests::everything::server().cache_hint(
        mcp_service::schema::CacheScope::Public,
        std::time::Duration::from_secs(60),
    );
    let mut svc = Svc::new(&server);
    let s = svc.send(modern(1, "tools/list", json!({}), caps));
    let r = svc.json(s);
    assert_eq!(
        (&r["result"]["cacheScope"], &r["result"]["ttlMs"]),
        (&json!("public"), &json!(60_000))
    );
}

/// The convenience asks of a handler (`create_message`, `elicit_form`, `list_roots`) refuse a
/// capability the modern request did not declare the way 2026-07-28 prescribes — a
/// `MissingRequiredClientCapabilityError` (-32021, HTTP 400) naming it — even in a tool,
/// where an application failure would only be a tool error; a legacy session keeps the
/// tool error.
#[test]
fn convenience_asks_refuse_an_undeclared_capability_with_32021() {
    use mcp_service::schema::{CreateMessageRequestParams, RequestedSchema, Role, SamplingMessage};
    let server = Server::new("needs", "1")
        .tool(Tool::new("sample"), |ctx, _| async move {
            ctx.create_message(CreateMessageRequestParams {
                messages: vec![SamplingMessage::new(
                    Role::User,
                    mcp_service::schema::TextContent::new("hi"),
                )],
                max_tokens: 5,
                ..CreateMessageRequestParams::default()
            })
            .await?;
            Ok(CallToolResult::text("sampled"))
        })
        .tool(Tool::new("elicit"), |ctx, _| async move {
            ctx.elicit_form("?", RequestedSchema::default()).await?;
            Ok(CallToolResult::text("elicited"))
        })
        .tool(Tool::new("roots"), |ctx, _| async move {
            ctx.list_roots().await?;
            Ok(CallToolResult::text("listed"))
        });
    let mut svc = Svc::new(&server);
    for (i, (tool, capability)) in [
        ("sample", "sampling"),
        ("elicit", "elicitation"),
        ("roots", "roots"),
    ]
    .into_iter()
    .enumerate()
    {
        let id = i64::try_from(i).unwrap() + 1;
        let s = svc.send(modern(id, "tools/call", json!({"name": tool}), json!({})));
        let r = svc.json(s);
        assert_eq!(r["error"]["code"], -32021, "{tool}: {r}");
        assert_eq!(r["id"], id);
        assert_eq!(
            r["error"]["data"]["requiredCapabilities"],
            json!({capability: {}}),
            "{tool}"
        );
        assert_eq!(
            svc.h.response(s).status(),
            StatusCode::BAD_REQUEST,
            "{tool}"
        );
        // Declared: an input request instead.
        let caps = json!({capability: {}});
        let s = svc.send(modern(id + 10, "tools/call", json!({"name": tool}), caps));
        assert_eq!(
            svc.json(s)["result"]["resultType"],
            "input_required",
            "{tool}"
        );
    }
    // Legacy, declared nothing: a tool error, as before.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "legacy", "version": "1"}}});
    let s = svc.send(Req::post(&init.to_string()));
    let sid = svc
        .h
        .response(s)
        .header("mcp-session-id")
        .unwrap()
        .to_owned();
    svc.send(
        Req::post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .session(&sid)
            .version("2025-11-25"),
    );
    let call =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sample"}});
    let s = svc.send(
        Req::post(&call.to_string())
            .session(&sid)
            .version("2025-11-25"),
    );
    let r = svc.json(s);
    assert_eq!(r["result"]["isError"], true, "{r}");
}

/// A resource that does not exist is `-32602` (with the URI as data) for a modern client, the
/// code 2026-07-28 assigns, whether the registry or a handler says so; a legacy session keeps
/// `-32002`.
#[test]
fn an_unknown_resource_is_32602_for_a_modern_client() {
    use mcp_service::{Error, Resource};
    let server = Server::new("res", "1")
        .resource(Resource::new("test://gone", "gone"), |_, req| async move {
            Err(Error::resource_not_found(&req.uri))
        });
    let mut svc = Svc::new(&server);
    for (id, uri) in [(1, "test://nowhere"), (2, "test://gone")] {
        let s = svc.send(modern(id, "resources/read", json!({"uri": uri}), json!({})));
        let r = svc.json(s);
        assert_eq!(r["error"]["code"], -32602, "{uri}: {r}");
        assert_eq!(r["error"]["data"]["uri"], uri);
        assert!(r.get("result").is_none());
    }
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "legacy", "version": "1"}}});
    let s = svc.send(Req::post(&init.to_string()));
    let sid = svc
        .h
        .response(s)
        .header("mcp-session-id")
        .unwrap()
        .to_owned();
    for (id, uri) in [(2, "test://nowhere"), (3, "test://gone")] {
        let read = json!({"jsonrpc": "2.0", "id": id, "method": "resources/read",
            "params": {"uri": uri}});
        let s = svc.send(
            Req::post(&read.to_string())
                .session(&sid)
                .version("2025-11-25"),
        );
        assert_eq!(svc.json(s)["error"]["code"], -32002, "{uri}");
    }
}

/// The everything server's 2026-07-28 fixtures through the service layer: several asks in
/// one round, rounds that follow each other, a prompt that asks, asks limited to the
/// declared capabilities, an altered `requestState` refused, no log without a level.
#[test]
fn everything_mrtr_fixtures_run_their_rounds() {
    let all = json!({"sampling": {}, "elicitation": {}, "roots": {}});
    let mut svc = Svc::new(&mcp_tests::everything::server());
    let answer = |method: &str| match method {
        "elicitation/create" => {
            json!({"action": "accept", "content": {"name": "Ada", "color": "blue", "ok": true, "context": "Ada's"}})
        }
        "sampling/createMessage" => json!({"role": "assistant", "model": "m",
            "content": {"type": "text", "text": "Paris"}}),
        "roots/list" => json!({"roots": [{"uri": "file:///r"}]}),
        other => panic!("unexpected input request {other}"),
    };
    // Answers every input request until the result is complete; the methods asked, by round.
    let run = |svc: &mut Svc, method: &str, params: Value, caps: &Value| {
        let mut rounds: Vec<Vec<String>> = Vec::new();
        let mut params = params;
        for id in 1..10 {
            let s = svc.send(modern(id, method, params.clone(), caps.clone()));
            let r = svc.json(s);
            let result = r["result"].clone();
            if result["resultType"] != "input_required" {
                return (rounds, r);
            }
            let mut responses = serde_json::Map::new();
            let mut asked = Vec::new();
            for (key, req) in result["inputRequests"].as_object().unwrap() {
                let m = req["method"].as_str().unwrap();
                asked.push(m.to_owned());
                responses.insert(key.clone(), answer(m));
            }
            rounds.push(asked);
            params["inputResponses"] = Value::Object(responses);
            params["requestState"] = result["requestState"].clone();
        }
        panic!("{method} never completed");
    };
    let call = |name: &str| json!({"name": name, "arguments": {}});

    let (rounds, r) = run(
        &mut svc,
        "tools/call",
        call("test_input_required_result_multiple_inputs"),
        &all,
    );
    assert_eq!(rounds.len(), 1, "one round: {rounds:?}");
    let mut asked = rounds[0].clone();
    asked.sort();
    assert_eq!(
        asked,
        ["elicitation/create", "roots/list", "sampling/createMessage"]
    );
    assert_eq!(text_of(&r), "name=Ada, greeting=Paris, roots=file:///r");

    let (rounds, r) = run(
        &mut svc,
        "tools/call",
        call("test_input_required_result_multi_round"),
        &all,
    );
    assert_eq!(rounds, [["elicitation/create"], ["elicitation/create"]]);
    assert_eq!(text_of(&r), "Ada likes blue");

    let (rounds, r) = run(
        &mut svc,
        "prompts/get",
        json!({"name": "test_input_required_result_prompt"}),
        &all,
    );
    assert_eq!(rounds.len(), 1);
    assert!(
        r["result"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("Ada"),
        "{r}"
    );

    let (rounds, r) = run(
        &mut svc,
        "tools/call",
        call("test_input_required_result_capabilities"),
        &json!({"sampling": {}}),
    );
    assert_eq!(
        rounds,
        [["sampling/createMessage"]],
        "only what was declared"
    );
    assert_eq!(text_of(&r), "capabilities-ok: sampling (Paris)");
    let (rounds, r) = run(
        &mut svc,
        "tools/call",
        call("test_input_required_result_capabilities"),
        &json!({}),
    );
    assert!(rounds.is_empty());
    assert_eq!(text_of(&r), "No supported capabilities declared");

    let (_, r) = run(
        &mut svc,
        "tools/call",
        call("test_missing_capability"),
        &json!({}),
    );
    assert_eq!(r["error"]["code"], -32021, "{r}");

    // An altered state is refused before the handler runs.
    let s = svc.send(modern(
        50,
        "tools/call",
        call("test_input_required_result_tampered_state"),
        all.clone(),
    ));
    let state = svc.json(s)["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut retry = call("test_input_required_result_tampered_state");
    retry["requestState"] = json!(format!("{state}-TAMPERED"));
    retry["inputResponses"] = json!({});
    let s = svc.send(modern(51, "tools/call", retry, all.clone()));
    assert_eq!(svc.json(s)["error"]["code"], -32602);

    // No logLevel in _meta: no notifications/message at all, only the result.
    let s = svc.send(modern(
        60,
        "tools/call",
        call("test_logging_tool"),
        all.clone(),
    ));
    let msgs = svc.h.response(s).messages();
    assert!(
        msgs.iter().all(|m| m["method"] != "notifications/message"),
        "{msgs:?}"
    );
    assert_eq!(text_of(&svc.json(s)), "Logging evaluated");
}
