//! The cluster store's seam on the driver's side: [`ClusterBackend`] (what executes a
//! clustered router's store operations), [`StoreLink`] (one router's connection to it),
//! [`ClusterInbox`] (where its answers and bus messages come back), and
//! [`SharedMemoryCluster`], one in-memory store for the routers of one process.

use std::time::Instant;

use mcp_proto::server::{
    BusMessage, ClusterDelivery, MemberId, MemoryCluster, StoreError, StoreOp, StoreReply, Ticket,
};

/// Executes a clustered router's store operations: the seam between the sans-IO router
/// and a real store (Redis, in `mcp-redis`; [`SharedMemoryCluster`](crate::SharedMemoryCluster) in one
/// process). The driver connects each router once and hands it every [`StoreOp`] the
/// router emits; the backend answers through the [`ClusterInbox`] it was given.
///
/// # Obligations
///
/// - Operations of one session are applied in the order they are submitted.
/// - Every operation but [`StoreOp::Unfollow`] is answered exactly once, except
///   [`StoreOp::Follow`], answered at once and then whenever its log grows, each answer
///   continuing the previous one (a repeated event is tolerated, a skipped one is not),
///   until [`StoreOp::Unfollow`]; a follow that breaks is answered [`StoreReply::Failed`].
/// - Every call has a deadline and a bounded retry: an operation that cannot be done is
///   answered [`StoreReply::Failed`], never left hanging (the router also times out).
/// - [`BusMessage`]s of other routers are delivered to [`ClusterInbox::bus`]; when the
///   backend may have missed some, it calls [`ClusterInbox::bus_lost`].
/// - `submit` never blocks: it queues the operation for the backend's own tasks.
/// - When it loses the store (its connection breaks, a dial fails) it may say so with
///   [`ClusterInbox::store_unreachable`], and [`ClusterInbox::store_reachable`] once it is
///   back: the router's readiness reads them. A backend that never reports is taken as
///   reachable.
/// - When its queue of operations not yet done runs high it may say so with
///   [`StoreLink::busy`]: the driver asks as each request comes in, and the router pushes
///   new requests back while it is.
pub trait ClusterBackend: Send + Sync + 'static {
    /// Connects the router of instance `instance`: its answers and bus messages go to
    /// `inbox`.
    fn connect(&self, instance: &str, inbox: ClusterInbox) -> Box<dyn StoreLink>;
}

/// One router's connection to a [`ClusterBackend`].
pub trait StoreLink: Send + 'static {
    /// Queues `op` (named `ticket`), sent at `now`.
    fn submit(&mut self, now: Instant, ticket: Ticket, op: StoreOp);

    /// Whether the operations queued and not yet done run so high that new requests should
    /// be pushed back (503 with `Retry-After`) rather than add to them: asked as each
    /// request comes in. A link that never runs high keeps the default, `false`.
    fn busy(&mut self) -> bool {
        false
    }
}

/// Where a [`ClusterBackend`] delivers one router's answers and bus messages (the driver
/// feeds them to [`Router::handle_store`](mcp_proto::server::Router::handle_store), [`Router::handle_bus`](mcp_proto::server::Router::handle_bus) and
/// [`Router::handle_bus_lost`](mcp_proto::server::Router::handle_bus_lost)). Cheap to clone.
#[derive(Clone)]
pub struct ClusterInbox {
    deliver: std::sync::Arc<dyn Fn(ClusterDelivery) -> bool + Send + Sync>,
}

impl std::fmt::Debug for ClusterInbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterInbox")
    }
}

impl ClusterInbox {
    /// An inbox that hands each delivery to `deliver` (`false`: the router is gone).
    pub fn new(deliver: impl Fn(ClusterDelivery) -> bool + Send + Sync + 'static) -> Self {
        ClusterInbox {
            deliver: std::sync::Arc::new(deliver),
        }
    }

    /// The answer to `ticket`; `false` when the router is gone.
    pub fn reply(&self, ticket: Ticket, reply: StoreReply) -> bool {
        (self.deliver)(ClusterDelivery::Reply(ticket, reply))
    }

    /// A message from another router; `false` when this router is gone.
    pub fn bus(&self, message: BusMessage) -> bool {
        (self.deliver)(ClusterDelivery::Bus(message))
    }

    /// Bus messages may have been missed (the subscription broke); `false` when the router
    /// is gone.
    pub fn bus_lost(&self) -> bool {
        (self.deliver)(ClusterDelivery::BusLost)
    }

    /// The store became unreachable (the connection to it is lost), for `why`: the router's
    /// readiness answers 503 until [`store_reachable`](Self::store_reachable). `false` when
    /// the router is gone.
    pub fn store_unreachable(&self, why: impl Into<Box<str>>) -> bool {
        (self.deliver)(ClusterDelivery::StoreUnreachable(StoreError(why.into())))
    }

    /// The store is reachable (again); `false` when the router is gone.
    pub fn store_reachable(&self) -> bool {
        (self.deliver)(ClusterDelivery::StoreReachable)
    }
}

/// A [`MemoryCluster`] shared by the routers of one process, as a
/// [`ClusterBackend`]: several servers in one test process (or one
/// program) behave as instances of one cluster with no external store. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct SharedMemoryCluster {
    inner: std::sync::Arc<std::sync::Mutex<SharedInner>>,
}

#[derive(Debug, Default)]
struct SharedInner {
    store: MemoryCluster,
    inboxes: Vec<(MemberId, ClusterInbox)>,
}

impl SharedMemoryCluster {
    /// An empty shared store.
    pub fn new() -> Self {
        SharedMemoryCluster::default()
    }

    /// Runs `f` on the store (to inspect it, or make it unavailable).
    pub fn with<T>(&self, f: impl FnOnce(&mut MemoryCluster) -> T) -> T {
        f(&mut crate::lock(&self.inner).store)
    }

    /// Makes the store unavailable (`false`: every operation fails) or available again, and
    /// tells every router at once, as a backend tells of a lost or recovered connection.
    pub fn set_available(&self, available: bool) {
        let mut inner = crate::lock(&self.inner);
        inner.store.set_available(available);
        inner.flush();
    }
}

impl ClusterBackend for SharedMemoryCluster {
    fn connect(&self, _instance: &str, inbox: ClusterInbox) -> Box<dyn StoreLink> {
        let mut inner = crate::lock(&self.inner);
        let member = inner.store.join();
        inner.inboxes.push((member, inbox));
        Box::new(SharedLink {
            inner: self.inner.clone(),
            member,
        })
    }
}

struct SharedLink {
    inner: std::sync::Arc<std::sync::Mutex<SharedInner>>,
    member: MemberId,
}

impl StoreLink for SharedLink {
    fn submit(&mut self, now: Instant, ticket: Ticket, op: StoreOp) {
        let mut inner = crate::lock(&self.inner);
        inner.store.execute(now, self.member, ticket, op);
        inner.flush();
    }
}

impl SharedInner {
    /// Hands every member's deliveries to its inbox.
    fn flush(&mut self) {
        let SharedInner { store, inboxes } = self;
        for (member, inbox) in inboxes.iter() {
            for d in store.take(*member) {
                let _ = match d {
                    ClusterDelivery::Reply(t, r) => inbox.reply(t, r),
                    ClusterDelivery::Bus(m) => inbox.bus(m),
                    ClusterDelivery::BusLost => inbox.bus_lost(),
                    ClusterDelivery::StoreUnreachable(e) => inbox.store_unreachable(e.0),
                    ClusterDelivery::StoreReachable => inbox.store_reachable(),
                };
            }
        }
    }
}

impl Drop for SharedLink {
    fn drop(&mut self) {
        let mut inner = crate::lock(&self.inner);
        inner.store.leave(self.member);
        let member = self.member;
        inner.inboxes.retain(|(m, _)| *m != member);
    }
}
