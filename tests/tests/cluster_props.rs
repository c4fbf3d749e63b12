//! Property test of the cluster seam: two routers share one store, a client's GET stream
//! moves between them (disconnects, takeovers, `Last-Event-ID` resumes), handlers on either
//! publish, and the store's answers to either router are held back and released at random
//! (so they arrive late and out of order across routers), and the store's feed repeats
//! events at times (at least once, as after a reconnect). Whatever happens, the client sees
//! every published message exactly once, in publication order.

use http::StatusCode;
use mcp_proto::server::{ExchangeId, ServerConfig, SessionHandle, Target};
use mcp_tests::cluster_harness::Cluster;
use mcp_tests::server_harness::{Req, init_body, init_result, parse_sse};
use proptest::prelude::*;

const V: &str = "2025-11-25";

#[derive(Debug, Clone)]
enum Step {
    Publish(usize),
    OpenGet(usize),
    Disconnect,
    Hold(usize, bool),
    Redeliver(bool),
    Settle,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..2usize).prop_map(Step::Publish),
        2 => (0..2usize).prop_map(Step::OpenGet),
        1 => Just(Step::Disconnect),
        2 => (0..2usize, any::<bool>()).prop_map(|(n, h)| Step::Hold(n, h)),
        2 => Just(Step::Settle),
        1 => any::<bool>().prop_map(Step::Redeliver),
    ]
}

/// The client: its current GET, how much of it was read, what it saw.
struct Client {
    get: Option<(usize, ExchangeId)>,
    read: usize,
    last_id: Option<String>,
    seen: Vec<u64>,
}

impl Client {
    fn read(&mut self, c: &mut Cluster) {
        let Some((node, stream)) = self.get else {
            return;
        };
        let Some(h) = c.nodes[node].as_mut() else {
            return;
        };
        let body = h.response(stream).body.clone();
        let frames = parse_sse(&body);
        for f in frames.iter().skip(self.read) {
            if f.comment {
                continue;
            }
            if let Some(id) = &f.id {
                self.last_id = Some(id.clone());
            }
            if !f.data.is_empty() {
                let v: serde_json::Value = serde_json::from_str(&f.data).expect("JSON");
                if let Some(n) = v["params"]["n"].as_u64() {
                    self.seen.push(n);
                }
            }
        }
        self.read = frames.len();
        if h.response(stream).ended {
            self.get = None;
        }
    }

    fn open(&mut self, c: &mut Cluster, node: usize, sid: &str) {
        self.read(c);
        if let Some((old, stream)) = self.get.take() {
            // One GET at a time: the client drops the old connection first.
            let h = c.node(old);
            let now = h.now;
            h.router.handle_disconnect(now, stream);
            h.pump();
        }
        let mut req = Req::get(sid).version(V);
        if let Some(id) = &self.last_id {
            req = req.header("last-event-id", id);
        }
        let s = c.node(node).send(req);
        self.get = Some((node, s));
        self.read = 0;
    }
}

fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let mut c = Cluster::new(2, |_| ServerConfig::default().with_heartbeat_interval(None));
    let s = c.node(0).send(Req::post(&init_body(1, V)));
    c.settle();
    let (h, _, _) = c.node(0).expect_request();
    c.node(0).reply(h, &init_result(V));
    c.settle();
    let sid = c
        .node(0)
        .response(s)
        .header("mcp-session-id")
        .unwrap()
        .to_owned();
    // Each node holds the session (a request on each) and knows its handle.
    let mut handles: Vec<SessionHandle> = Vec::new();
    for i in 0..2 {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{},"method":"ping"}}"#, 10 + i);
        let _ = c.node(i).send(Req::post(&body).session(&sid).version(V));
        c.settle();
        let (h, session, _) = c.node(i).expect_request();
        c.node(i).reply(h, "{}");
        c.settle();
        handles.push(session.unwrap());
    }
    let mut client = Client {
        get: None,
        read: 0,
        last_id: None,
        seen: Vec::new(),
    };
    client.open(&mut c, 0, &sid);
    c.settle();
    let mut published = 0u64;
    for st in steps {
        match st {
            Step::Publish(i) => {
                published += 1;
                let params = format!(r#"{{"n":{published}}}"#);
                c.node(i).notify(
                    Target::Session(handles[i]),
                    "notifications/message",
                    &params,
                );
            }
            Step::OpenGet(i) => client.open(&mut c, i, &sid),
            Step::Disconnect => {
                client.read(&mut c);
                if let Some((node, stream)) = client.get.take() {
                    let h = c.node(node);
                    let now = h.now;
                    h.router.handle_disconnect(now, stream);
                    h.pump();
                }
            }
            Step::Hold(i, held) => c.hold(i, held),
            Step::Redeliver(on) => c.store.set_redeliver(on),
            Step::Settle => c.settle(),
        }
        c.settle();
        client.read(&mut c);
    }
    c.hold(0, false);
    c.hold(1, false);
    c.settle();
    client.open(&mut c, 0, &sid);
    c.settle();
    client.read(&mut c);
    let (node, stream) = client.get.expect("a final GET");
    prop_assert_eq!(c.node(node).response(stream).status(), StatusCode::OK);
    let expected: Vec<u64> = (1..=published).collect();
    prop_assert_eq!(
        client.seen,
        expected,
        "every message exactly once, in order"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    #[test]
    fn two_routers_on_one_store_never_lose_or_repeat_a_get_stream_message(
        steps in proptest::collection::vec(step(), 1..40)
    ) {
        run(steps)?;
    }
}
