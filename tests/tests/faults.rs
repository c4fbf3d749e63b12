//! Fault injection on loopback (`mcp_tests::faults`): our client and our server on every
//! runtime pair, through a proxy that cuts responses at random byte offsets (seeded), cuts
//! them early (head, priming event) and fragments them. Each ledger must show 0 lost, 0
//! duplicated, 0 hung, every call within its bound, one POST per call, no GET storm and
//! nothing left open; the only failure allowed is a call cut before any event id reached the
//! client, which fails at once with `PeerError::Interrupted`. A short run; the CI step runs
//! `mcp-faults` for the full workload.

use std::time::Duration;

use mcp_tests::faults::{Faults, Kind, Workload, run_ours};
use mcp_tests::runtime::Runtime;

const PAIRS: [(Runtime, Runtime); 4] = [
    (Runtime::Tokio, Runtime::Tokio),
    (Runtime::Tokio, Runtime::Smol),
    (Runtime::Smol, Runtime::Tokio),
    (Runtime::Smol, Runtime::Smol),
];

fn workload() -> Workload {
    // GET bursts of 150 are larger than a session's queue (64), as the 200 were.
    Workload {
        rounds: 10,
        n: 150,
        // 150 numbers 2 ms apart outlast a reconnect (retry 200 ms): messages keep coming
        // while the client is away.
        interval_ms: 2,
        retry: Duration::from_millis(200),
        timeout: Duration::from_secs(10),
    }
}

async fn every_pair(kind: Kind, faults: Faults) {
    let mut failed = Vec::new();
    for (i, (server, client)) in PAIRS.into_iter().enumerate() {
        let faults = Faults {
            seed: faults.seed * 10 + i as u64,
            ..faults
        };
        let ledger = run_ours(server, client, kind, faults, workload())
            .await
            .unwrap_or_else(|e| panic!("{} <- {}: {e}", server.name(), client.name()));
        eprintln!("{} <- {}: {ledger}", server.name(), client.name());
        if ledger.cuts == 0 {
            failed.push(format!(
                "{} <- {}: nothing was cut",
                server.name(),
                client.name()
            ));
        }
        if let Err(e) = ledger.check() {
            failed.push(format!("{} <- {}: {e}", server.name(), client.name()));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_streams_cut_anywhere_lose_nothing() {
    // The quick run's responses are ≈ 6 KB: cut within 5 KB so that cuts happen.
    every_pair(Kind::Post, Faults::cuts(1, 0.3).within(5_000)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_streams_cut_early_and_fragmented_lose_nothing() {
    every_pair(Kind::Post, Faults::early_cuts(2, 0.3).fragmented()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_get_stream_cut_anywhere_loses_nothing() {
    every_pair(Kind::Get, Faults::cuts(3, 0.3).within(4_000)).await;
}
