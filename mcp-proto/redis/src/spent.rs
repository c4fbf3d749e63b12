//! Operations the worker is done with, handed back to be dropped on the thread that
//! submitted them.
//!
//! An operation is built on the router's thread and finished on the link's. Dropped there,
//! each of its allocations (a commit's list of streams, each stream's name and events, the
//! payloads' shared counts) was freed on a thread that never allocates those sizes itself:
//! glibc takes such frees through the allocating thread's arena (its lock, its bins), not
//! through a per-thread cache, and the router's thread then misses its own cache for the next
//! operation it builds. On `bench-scale`'s calls phase on Redis the drops were a quarter of
//! the link thread's samples. So the worker hands the operations back after their answers,
//! and the link drops them on the router's thread at its next submission (a router that
//! submits nothing more leaves at most [`MAX_SPENT`] of them waiting; past that, the worker
//! drops them itself).

use std::sync::{Mutex, PoisonError, TryLockError};

use mcp_proto::server::StoreOp;

/// The most operations waiting to be dropped on the submitting thread.
pub(crate) const MAX_SPENT: usize = 4096;

/// Operations answered and not yet dropped (shared by a link and its worker).
#[derive(Default)]
pub(crate) struct Spent {
    ops: Mutex<Vec<StoreOp>>,
}

impl Spent {
    /// The worker hands back `ops` (emptied; its room kept): what does not fit under
    /// [`MAX_SPENT`] is dropped here.
    pub(crate) fn give(&self, ops: &mut Vec<StoreOp>) {
        if ops.is_empty() {
            return;
        }
        {
            let mut spent = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
            let room = MAX_SPENT.saturating_sub(spent.len());
            let keep = ops.len().min(room);
            spent.extend(ops.drain(..keep));
        }
        ops.clear();
    }

    /// The submitting thread drops what was handed back, unless the worker holds the list
    /// this instant (then the next call does). `scratch` is an empty list whose room is
    /// swapped in, so that neither thread grows a list from nothing each time.
    pub(crate) fn drop_here(&self, scratch: &mut Vec<StoreOp>) {
        match self.ops.try_lock() {
            Ok(mut spent) if !spent.is_empty() => std::mem::swap(&mut *spent, scratch),
            Err(TryLockError::Poisoned(p)) => {
                let mut spent = p.into_inner();
                std::mem::swap(&mut *spent, scratch);
            }
            _ => return,
        }
        // Dropped outside the lock.
        scratch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use bytes::Bytes;

    fn publish(payload: &Bytes) -> StoreOp {
        StoreOp::Publish {
            session: "s1".into(),
            payload: payload.clone(),
            capacity: 8,
        }
    }

    #[test]
    fn operations_handed_back_are_dropped_by_the_submitting_side_and_past_the_cap_at_once() {
        let spent = Spent::default();
        let payload = Bytes::from(b"{}".to_vec());
        let mut done = vec![publish(&payload), publish(&payload)];
        spent.give(&mut done);
        assert!(done.is_empty());
        // Held until the submitting side drops them.
        assert!(!payload.is_unique());
        let mut scratch = Vec::new();
        spent.drop_here(&mut scratch);
        assert!(payload.is_unique() && scratch.is_empty());
        // The room goes back and forth: the worker's next list has it.
        spent.give(&mut vec![publish(&payload)]);
        let mut scratch2 = Vec::new();
        spent.drop_here(&mut scratch2);
        assert!(payload.is_unique());

        // Past the cap, the rest is dropped by the worker at once.
        let mut many: Vec<StoreOp> = (0..MAX_SPENT + 3).map(|_| publish(&payload)).collect();
        spent.give(&mut many);
        assert!(many.is_empty());
        assert_eq!(spent.ops.lock().unwrap().len(), MAX_SPENT);
        spent.drop_here(&mut scratch);
        assert!(payload.is_unique());
    }
}
