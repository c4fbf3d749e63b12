//! Several routers sharing one [`MemoryCluster`] on one virtual clock: the sans-IO harness
//! of the cluster seam. Each node is a [`Harness`]; [`Cluster::settle`] runs every store
//! operation a router emitted and hands back what the store answered or broadcast, until
//! nothing moves (or, with [`Cluster::hold`], keeps a node's deliveries back).

use std::collections::BTreeSet;
use std::time::Duration;

use mcp_proto::server::{
    ClusterConfig, ClusterDelivery, MemberId, MemoryCluster, ServerConfig, ServerOutput,
};

use crate::server_harness::{AppEvent, Harness};

/// The routers and the store.
pub struct Cluster {
    /// The store and bus.
    pub store: MemoryCluster,
    /// The nodes (a dead one is `None`).
    pub nodes: Vec<Option<Harness>>,
    members: Vec<MemberId>,
    /// Nodes whose store answers and bus messages are held back.
    held: BTreeSet<usize>,
    /// Outputs nobody inspected yet are kept in each harness; store operations are taken.
    pub ops_executed: u64,
}

impl Cluster {
    /// `n` routers, configured by `config(i)` plus cluster membership as instance `n<i>`
    /// and session ids `n<i>-<k>` (deterministic, distinct across nodes).
    pub fn new(n: usize, config: impl Fn(usize) -> ServerConfig) -> Cluster {
        Cluster::tuned(n, config, |k| k)
    }

    /// [`new`](Self::new), each node's cluster settings passed through `tune`.
    pub fn tuned(
        n: usize,
        config: impl Fn(usize) -> ServerConfig,
        tune: impl Fn(ClusterConfig) -> ClusterConfig,
    ) -> Cluster {
        let mut store = MemoryCluster::new();
        let mut nodes = Vec::new();
        let mut members = Vec::new();
        for i in 0..n {
            let mut k = 0u64;
            let cfg = config(i)
                .with_cluster(tune(ClusterConfig::new(format!("n{i}")).expect("name")))
                .with_session_ids(move || {
                    k += 1;
                    format!("n{i}-{k}")
                });
            nodes.push(Some(Harness::new(cfg)));
            members.push(store.join());
        }
        let start = nodes.iter().flatten().map(|h| h.now).max().expect("nodes");
        for h in nodes.iter_mut().flatten() {
            h.start = start;
            h.now = start;
        }
        Cluster {
            store,
            nodes,
            members,
            held: BTreeSet::new(),
            ops_executed: 0,
        }
    }

    /// Node `i`.
    pub fn node(&mut self, i: usize) -> &mut Harness {
        self.nodes[i].as_mut().expect("the node is dead")
    }

    /// Holds back (`true`) or releases node `i`'s deliveries.
    pub fn hold(&mut self, i: usize, held: bool) {
        if held {
            self.held.insert(i);
        } else {
            self.held.remove(&i);
        }
    }

    /// Drops what the store has for node `i` and not yet delivered (lost messages).
    pub fn discard(&mut self, i: usize) {
        let _ = self.store.take(self.members[i]);
    }

    /// Kills node `i` (its router is dropped; the store forgets its follows).
    pub fn kill(&mut self, i: usize) {
        self.nodes[i] = None;
        self.store.leave(self.members[i]);
    }

    /// Runs store operations and deliveries until nothing moves.
    pub fn settle(&mut self) {
        for _ in 0..10_000 {
            let mut moved = false;
            for i in 0..self.nodes.len() {
                let member = self.members[i];
                let Some(h) = self.nodes[i].as_mut() else {
                    continue;
                };
                h.pump();
                let now = h.now;
                let mut rest = std::collections::VecDeque::new();
                for e in std::mem::take(&mut h.app) {
                    match e {
                        AppEvent::Other(ServerOutput::Store { ticket, op }) => {
                            self.store.execute(now, member, ticket, op);
                            self.ops_executed += 1;
                            moved = true;
                        }
                        other => rest.push_back(other),
                    }
                }
                h.app = rest;
            }
            for i in 0..self.nodes.len() {
                if self.held.contains(&i) {
                    continue;
                }
                let member = self.members[i];
                let deliveries = self.store.take(member);
                let Some(h) = self.nodes[i].as_mut() else {
                    continue;
                };
                for d in deliveries {
                    moved = true;
                    match d {
                        ClusterDelivery::Reply(t, r) => h.router.handle_store(h.now, t, r),
                        ClusterDelivery::Bus(m) => h.router.handle_bus(h.now, m),
                        ClusterDelivery::BusLost => h.router.handle_bus_lost(h.now),
                        ClusterDelivery::StoreUnreachable(e) => {
                            h.router.handle_store_unreachable(h.now, e)
                        }
                        ClusterDelivery::StoreReachable => h.router.handle_store_reachable(h.now),
                    }
                }
                h.pump();
            }
            if !moved {
                return;
            }
        }
        panic!("the cluster did not settle");
    }

    /// The service-level notices node `i` output since the last call
    /// ([`ServerOutput::ClusterNotice`]: sender, payload); its other outputs stay.
    pub fn notices(&mut self, i: usize) -> Vec<(Box<str>, bytes::Bytes)> {
        let h = self.node(i);
        let mut out = Vec::new();
        let mut rest = std::collections::VecDeque::new();
        for e in std::mem::take(&mut h.app) {
            match e {
                AppEvent::Other(ServerOutput::ClusterNotice { from, payload }) => {
                    out.push((from, payload));
                }
                other => rest.push_back(other),
            }
        }
        h.app = rest;
        out
    }

    /// Moves every node's clock by `d` (firing timers), settling as it goes.
    pub fn advance(&mut self, d: Duration) {
        let step = Duration::from_millis(100).min(d);
        let mut left = d;
        while !left.is_zero() {
            let s = step.min(left);
            for h in self.nodes.iter_mut().flatten() {
                h.advance(s);
            }
            self.settle();
            left -= s;
        }
    }
}
