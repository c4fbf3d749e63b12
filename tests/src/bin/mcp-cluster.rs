//! `mcp-cluster`: runs a command against three `mcp-everything` processes sharing one Redis
//! behind an nginx round-robin load balancer (`mcp_tests::cluster_procs`), the cluster's URL
//! appended to the command; exits with the command's status. `.ci/run` points the official
//! TypeScript and Python SDK clients at it.
//!
//! ```text
//! mcp-cluster [--runtime tokio|smol] [--instances N] -- <command…>
//! ```
//!
//! Needs `redis-server` and `nginx` (Debian `redis-server`, `nginx-light`) and the
//! `mcp-everything` binary next to this one. On failure it prints every instance's log and
//! nginx's.

use std::process::{Command, ExitCode};

use mcp_tests::cluster_procs::ProcessCluster;
use mcp_tests::runtime::Runtime;

const USAGE: &str = "usage: mcp-cluster [--runtime tokio|smol] [--instances N] -- <command…>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(split) = args.iter().position(|a| a == "--") else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let (opts, command) = (&args[..split], &args[split + 1..]);
    let (mut runtime, mut n) = (Runtime::Tokio, 3);
    let mut it = opts.iter();
    while let Some(o) = it.next() {
        let value = it.next();
        let ok = match (o.as_str(), value) {
            ("--runtime", Some(v)) => v.parse().map(|r| runtime = r).is_ok(),
            ("--instances", Some(v)) => v.parse().map(|k: usize| n = k.clamp(1, 26)).is_ok(),
            _ => false,
        };
        if !ok {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    }
    let Some((program, rest)) = command.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let everything = match std::env::current_exe() {
        Ok(me) => me.with_file_name("mcp-everything"),
        Err(e) => {
            eprintln!("cannot locate mcp-everything: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cluster = match ProcessCluster::start(&everything, runtime, n, &["--retry-ms", "500"]) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mcp-cluster: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "mcp-cluster: {n} {runtime} instances on {} behind {}",
        cluster.redis().url(),
        cluster.url()
    );
    let status = Command::new(program).args(rest).arg(cluster.url()).status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!("mcp-cluster: {program} exited with {s}\n{}", cluster.logs());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("mcp-cluster: cannot run {program}: {e}");
            ExitCode::FAILURE
        }
    }
}
