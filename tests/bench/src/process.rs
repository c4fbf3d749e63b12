//! The server children (this benchmark re-executed with `--serve`) and what `/proc` says
//! about a process.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use crate::client::Target;

/// What a server child prints first: this, then its URL.
pub const URL_LINE: &str = "bench server on ";

/// On-CPU time of process `pid`'s live threads, in nanoseconds: the sum of the first field
/// of each `/proc/<pid>/task/<tid>/schedstat` (the scheduler's exact account, where
/// `/proc/<pid>/stat` counts 10 ms ticks). A thread that ends between two readings takes
/// its time with it (the processes measured keep theirs).
///
/// # Errors
///
/// When `/proc/<pid>/task` cannot be read, or no thread's schedstat can.
pub fn cpu_ns(pid: u32) -> Result<u64, String> {
    let dir = format!("/proc/{pid}/task");
    let tasks = std::fs::read_dir(&dir).map_err(|e| format!("{dir}: {e}"))?;
    let mut total = 0;
    let mut read = 0;
    for task in tasks.flatten() {
        // A thread may end between the listing and the read: skipped.
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        let ns: u64 = stat
            .split_whitespace()
            .next()
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| format!("{}: bad schedstat {stat:?}", task.path().display()))?;
        total += ns;
        read += 1;
    }
    if read == 0 {
        return Err(format!("{dir}: no schedstat"));
    }
    Ok(total)
}

/// VmRSS of process `pid`, in bytes.
///
/// # Errors
///
/// When `/proc/<pid>/status` cannot be read or has no VmRSS.
pub fn rss_bytes(pid: u32) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| "no VmRSS".to_owned())
}

/// A server child: killed when dropped, stopped in order (stdin closed) by [`stop`](Self::stop).
pub struct ServerProcess {
    child: Child,
    /// Closing it (drop) tells the server to stop.
    stdin: Option<ChildStdin>,
    /// The URL it printed.
    pub url: String,
    /// `127.0.0.1:PORT`.
    pub authority: String,
    /// Its endpoint's path.
    pub path: String,
}

impl ServerProcess {
    /// Runs `exe args` (stdin and stdout piped, stderr inherited) and reads the URL it prints
    /// on its first line ([`URL_LINE`]); `label` names it in errors.
    ///
    /// # Errors
    ///
    /// When it cannot start or prints something else first (it is killed then).
    pub fn start(exe: &Path, args: &[&str], label: &str) -> Result<ServerProcess, String> {
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start the {label} server: {e}"))?;
        let stdin = child.stdin.take();
        let mut line = String::new();
        let read = match child.stdout.take() {
            Some(stdout) => BufReader::new(stdout)
                .read_line(&mut line)
                .map_err(|e| format!("reading the {label} server's URL: {e}")),
            None => Err("no stdout".to_owned()),
        };
        let parsed = read.and_then(|_| {
            let url = line
                .trim()
                .strip_prefix(URL_LINE)
                .ok_or_else(|| format!("the {label} server printed {line:?}"))?;
            Ok((url.to_owned(), Target::from_url(url)?))
        });
        match parsed {
            Ok((url, target)) => Ok(ServerProcess {
                url,
                authority: target.authority.to_string(),
                path: target.path.to_string(),
                child,
                stdin,
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }

    /// Its PID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Where its endpoint is.
    pub fn target(&self) -> Target {
        Target {
            authority: self.authority.as_str().into(),
            path: self.path.as_str().into(),
            http2: false,
        }
    }

    /// Its socket address (for a load balancer's upstream list).
    ///
    /// # Errors
    ///
    /// When its authority is not `IP:PORT`.
    pub fn addr(&self) -> Result<SocketAddr, String> {
        self.authority
            .parse()
            .map_err(|e| format!("{}: {e}", self.authority))
    }

    /// On-CPU time of the whole process (every thread), in nanoseconds.
    ///
    /// # Errors
    ///
    /// As [`cpu_ns`].
    pub fn cpu_ns(&self) -> Result<u64, String> {
        cpu_ns(self.pid())
    }

    /// VmRSS in bytes.
    ///
    /// # Errors
    ///
    /// As [`rss_bytes`].
    pub fn rss_bytes(&self) -> Result<u64, String> {
        rss_bytes(self.pid())
    }

    /// Closes its stdin and waits (1 s at most) for it to exit; kills it otherwise.
    pub fn stop(mut self) {
        drop(self.stdin.take());
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
