//! [`SharedMemoryCluster`]: one in-memory cluster store for the routers of one process.

use std::time::Instant;

use crate::server::{
    ClusterBackend, ClusterDelivery, ClusterInbox, MemberId, MemoryCluster, StoreLink, StoreOp,
    Ticket,
};

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
        f(&mut crate::service::cancel::lock(&self.inner).store)
    }
}

impl ClusterBackend for SharedMemoryCluster {
    fn connect(&self, _instance: &str, inbox: ClusterInbox) -> Box<dyn StoreLink> {
        let mut inner = crate::service::cancel::lock(&self.inner);
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
        let mut inner = crate::service::cancel::lock(&self.inner);
        inner.store.execute(now, self.member, ticket, op);
        let SharedInner { store, inboxes } = &mut *inner;
        for (member, inbox) in inboxes.iter() {
            for d in store.take(*member) {
                let _ = match d {
                    ClusterDelivery::Reply(t, r) => inbox.reply(t, r),
                    ClusterDelivery::Bus(m) => inbox.bus(m),
                    ClusterDelivery::BusLost => inbox.bus_lost(),
                };
            }
        }
    }
}

impl Drop for SharedLink {
    fn drop(&mut self) {
        let mut inner = crate::service::cancel::lock(&self.inner);
        inner.store.leave(self.member);
        let member = self.member;
        inner.inboxes.retain(|(m, _)| *m != member);
    }
}
