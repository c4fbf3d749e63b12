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
//! and the link drops them on the router's thread at its next submission. What may wait is
//! bounded: at most [`MAX_SPENT`] operations, each carrying at most [`MAX_SPENT_BYTES`] of
//! payload (a larger one is dropped by the worker at once: its buffers are large allocations,
//! which glibc serves from its large bins or `mmap` whichever thread frees them), so that a
//! router that submits nothing more holds at most a few megabytes until it does. Only the
//! operations answered from a batch come back; the rare ones run to their end on the link's
//! thread (before a connection is up, retries, follows, deletes) are dropped there.

use std::sync::{Mutex, PoisonError, TryLockError};

use mcp_proto::server::{RecordOp, StoreOp};

/// The most operations waiting to be dropped on the submitting thread.
pub(crate) const MAX_SPENT: usize = 1024;

/// The most payload bytes an operation waiting to be dropped on the submitting thread
/// carries ([`payload_bytes`]).
pub(crate) const MAX_SPENT_BYTES: usize = 4096;

/// The bytes of payload `op` holds (events, messages, records, states).
fn payload_bytes(op: &StoreOp) -> usize {
    let state = |r: &mcp_proto::server::SessionRecord| r.state.as_ref().map_or(0, |s| s.len());
    match op {
        StoreOp::CommitStreams { streams, .. } => streams
            .iter()
            .flat_map(|c| &c.events)
            .map(|e| e.payload.len())
            .sum(),
        StoreOp::Publish { payload, .. } => payload.len(),
        StoreOp::Create { record, .. } | StoreOp::Save { record, .. } => state(record),
        StoreOp::Record(RecordOp::Save { value, .. }) => value.len(),
        _ => 0,
    }
}

/// Operations answered and not yet dropped (shared by a link and its worker).
#[derive(Default)]
pub(crate) struct Spent {
    ops: Mutex<Vec<StoreOp>>,
}

impl Spent {
    /// The worker hands back `ops` (emptied; its room kept): an operation over
    /// [`MAX_SPENT_BYTES`], and what does not fit under [`MAX_SPENT`], is dropped here.
    pub(crate) fn give(&self, ops: &mut Vec<StoreOp>) {
        ops.retain(|op| payload_bytes(op) <= MAX_SPENT_BYTES);
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
            gap: false,
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

        // An operation carrying more than the bound is dropped by the worker at once.
        let large = Bytes::from(vec![b'x'; MAX_SPENT_BYTES + 1]);
        spent.give(&mut vec![publish(&large), publish(&payload)]);
        assert!(large.is_unique() && !payload.is_unique());
        spent.drop_here(&mut scratch);
        assert!(payload.is_unique());
    }
}
