//! Memory: an open GET stream (the standalone SSE stream of a session, on its own HTTP/1.1
//! connection, idle between heartbeats) costs the server a bounded heap: at most 10,000
//! bytes on both runtimes; on tokio, a stream on a connection that served a POST first
//! (hyper's, then) what hyper's own buffers leave room for (see [`bound`]).
//!
//! A counting allocator sees the whole process: the server runs here on its own thread, and
//! the clients are blocking `std` sockets that allocate nothing per connection, so what the
//! heap gains while the streams open is the server's. Sessions are opened first (their cost
//! is `server_memory.rs`'s); then one GET stream per session, each on its own connection,
//! and the heap measured once they are all open and again after every stream got a
//! heartbeat (what a write leaves behind counts too). Hundreds of streams average the noise
//! of the tables that grow with them away; nothing here is timed.
//!
//! `MCP_GET_STREAMS=N` measures N streams (400 by default), `MCP_GET_STREAM_HISTOGRAM=1`
//! prints the live bytes gained by allocation size, `MCP_GET_STREAM_TRACE=MIN` where the
//! allocations of at least MIN bytes still live once the streams are open come from.
#![allow(unsafe_code)] // The counting allocator, in this test binary only.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use mcp_proto::server::ServerConfig;
use mcp_service::Server;
use mcp_tests::runtime::Runtime;

/// Live bytes, in all and by size class (`[k]`: sizes in (2^(k-1), 2^k]).
static LIVE: AtomicIsize = AtomicIsize::new(0);
static BY_SIZE: [AtomicIsize; 40] = [const { AtomicIsize::new(0) }; 40];

fn class(size: usize) -> usize {
    (usize::BITS - size.saturating_sub(1).leading_zeros()) as usize
}

#[allow(clippy::cast_possible_wrap)]
fn count(size: usize, sign: isize) {
    LIVE.fetch_add(sign * size as isize, Ordering::Relaxed);
    BY_SIZE[class(size).min(39)].fetch_add(sign * size as isize, Ordering::Relaxed);
}

/// `MCP_GET_STREAM_TRACE=N`: where the allocations of at least N bytes made while the streams
/// open and still live once they are come from (backtraces, grouped).
static TRACE_FROM: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
type Traces = std::collections::HashMap<usize, (usize, std::backtrace::Backtrace)>;
static TRACES: std::sync::Mutex<Option<Traces>> = std::sync::Mutex::new(None);

std::thread_local! {
    static TRACING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` unless this thread is already tracing (the allocations of the tracer itself).
fn tracing(f: impl FnOnce()) {
    if TRACE_FROM.load(Ordering::Relaxed) == 0 || TRACING.with(std::cell::Cell::get) {
        return;
    }
    TRACING.with(|t| t.set(true));
    f();
    TRACING.with(|t| t.set(false));
}

fn traced(ptr: *mut u8, size: usize) {
    if size >= TRACE_FROM.load(Ordering::Relaxed) {
        tracing(|| {
            if let Ok(mut traces) = TRACES.lock() {
                let bt = std::backtrace::Backtrace::force_capture();
                traces
                    .get_or_insert_with(Default::default)
                    .insert(ptr as usize, (size, bt));
            }
        });
    }
}

fn untraced(ptr: *mut u8) {
    tracing(|| {
        if let Ok(mut traces) = TRACES.lock()
            && let Some(traces) = traces.as_mut()
        {
            traces.remove(&(ptr as usize));
        }
    });
}

fn print_traces() {
    TRACE_FROM.store(0, Ordering::Relaxed);
    let traces = TRACES.lock().unwrap().take().unwrap_or_default();
    let mut groups: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    for (size, bt) in traces.into_values() {
        let text = bt.to_string();
        let mut frames = String::new();
        let mut lines = text.lines().peekable();
        let mut kept = 0;
        while let Some(line) = lines.next() {
            if kept < 8
                && line.trim_start().starts_with(|c: char| c.is_ascii_digit())
                && !line.contains("get_stream_memory")
                && !line.contains("alloc::")
                && !line.contains("core::")
                && !line.contains("std::")
            {
                let at = lines.peek().map_or("", |l| l.trim());
                let name = line.trim().split_once(": ").map_or(line, |l| l.1);
                frames.push_str(&format!("    {name}  {at}\n"));
                kept += 1;
            }
        }
        let group = groups.entry(format!("{size} bytes\n{frames}")).or_default();
        group.0 += 1;
        group.1 += size;
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g.1.1));
    for (what, (count, bytes)) in groups {
        println!("--- {count} live, {bytes} bytes: {what}");
    }
}

struct Counting;

// SAFETY: every method forwards to `System` unchanged and only adds bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        // SAFETY: same contract as the caller's.
        let ptr = unsafe { System.alloc(layout) };
        traced(ptr, layout.size());
        ptr
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(layout.size(), -1);
        untraced(ptr);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(layout.size(), -1);
        count(new_size, 1);
        untraced(ptr);
        // SAFETY: same contract as the caller's.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        traced(new, new_size);
        new
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The live bytes now, in all and by size class.
fn snapshot() -> (isize, Vec<isize>) {
    let by_size = BY_SIZE.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    (LIVE.load(Ordering::Relaxed), by_size)
}

/// The process's resident set, in bytes (Linux; 0 elsewhere): shown beside the heap, not
/// checked (it depends on the allocator's reuse of pages).
fn rss() -> isize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: isize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// The allocator counts every thread's bytes: the tests here measure one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The streams measured (`MCP_GET_STREAMS` overrides it, to look closer).
fn streams() -> usize {
    std::env::var("MCP_GET_STREAMS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(400)
}
const V: &str = "2025-11-25";
const HEARTBEAT: Duration = Duration::from_millis(300);

/// The bound on the heap one open GET stream holds in the server (connection, HTTP library,
/// driver and router together), in bytes: on a connection of its own (`reused: false`), or
/// on one that served a POST first (`reused: true`).
fn bound(runtime: Runtime, reused: bool) -> f64 {
    match (runtime, reused) {
        // 6.2 KB measured (debug build): the connection's task with the response encoder,
        // async-h1's response channels, the driver's and the router's entries. Neither the
        // read buffer, nor the 4 KiB response buffer, nor the cork's are held between two
        // events, and the wait for the driver's answer (boxed) is freed once the head is out.
        (Runtime::Smol, _) => 10_000.0,
        // 6.3 KB measured (debug build): a connection whose first request is the GET is
        // answered outside hyper (`mcp-tokio`'s `first.rs`), and holds the connection's task,
        // the driver's and the router's entries; nothing of the response between two events.
        // Above this bound: hyper serving it (22.8 KB).
        (Runtime::Tokio, false) => 10_000.0,
        // 22.8 KB measured (debug build), 16 KiB of them hyper's own: the 8 KiB write buffer
        // it allocates for every HTTP/1 connection and the 8 KiB read buffer it keeps reading
        // into while a response streams (hyper does not let either be sized or freed). Above
        // this bound: the read buffer doubled to 16 KiB (the sniffed bytes handed to hyper
        // alone, as hyper-util's `auto` builder does), or hyper's slot for the request future
        // kept unboxed (1.8 KB).
        (Runtime::Tokio, true) => 24_000.0,
    }
}

/// Sends `request` on a new connection that the server closes after its answer, and returns
/// the whole answer.
fn round_trip(addr: SocketAddr, request: &str) -> String {
    let mut tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.write_all(request.as_bytes()).expect("write");
    let mut answer = Vec::new();
    tcp.read_to_end(&mut answer).expect("read");
    String::from_utf8(answer).expect("UTF-8")
}

fn post(addr: SocketAddr, session: Option<&str>, body: &str) -> String {
    let session = session.map_or(String::new(), |s| {
        format!("mcp-session-id: {s}\r\nmcp-protocol-version: {V}\r\n")
    });
    round_trip(
        addr,
        &format!(
            "POST /mcp HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\
             accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n\
             {session}content-length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// A new session's id.
fn open_session(addr: SocketAddr) -> String {
    let init = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{V}","capabilities":{{}},"clientInfo":{{"name":"m","version":"0"}}}}}}"#
    );
    let answer = post(addr, None, &init);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let id = answer
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .expect("a session id");
    let answer = post(
        addr,
        Some(&id),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    id
}

/// Reads from `tcp` into `buf` until `needle` came (it may straddle reads).
fn read_until(tcp: &mut TcpStream, needle: &[u8]) {
    let mut buf = [0u8; 512];
    let mut tail = [0u8; 64];
    let mut tail_len = 0;
    loop {
        let n = tcp.read(&mut buf).expect("read");
        assert!(n > 0, "the stream ended");
        // Search the previous tail followed by what came.
        let mut joined = [0u8; 64 + 512];
        joined[..tail_len].copy_from_slice(&tail[..tail_len]);
        joined[tail_len..tail_len + n].copy_from_slice(&buf[..n]);
        let seen = &joined[..tail_len + n];
        if seen.windows(needle.len()).any(|w| w == needle) {
            return;
        }
        let keep = seen.len().min(needle.len() - 1);
        tail[..keep].copy_from_slice(&seen[seen.len() - keep..]);
        tail_len = keep;
    }
}

/// Opens the GET stream of `session` on a new connection (after a POST on it when
/// `reused`); returns once its head came.
fn open_stream(addr: SocketAddr, session: &str, reused: bool) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut request = [0u8; 1024];
    let mut w = &mut request[..];
    if reused {
        let note =
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}"#;
        write!(
            w,
            "POST /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: application/json, text/event-stream\r\n\
             content-type: application/json\r\nmcp-session-id: {session}\r\n\
             mcp-protocol-version: {V}\r\ncontent-length: {}\r\n\r\n{note}",
            note.len()
        )
        .unwrap();
        let len = 1024 - w.len();
        tcp.write_all(&request[..len]).expect("write");
        let mut head = [0u8; 12];
        tcp.read_exact(&mut head).expect("a response");
        assert_eq!(&head, b"HTTP/1.1 202");
        // Its head, which ends its (empty) answer.
        read_until(&mut tcp, b"\r\n\r\n");
        w = &mut request[..];
    }
    write!(
        w,
        "GET /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\n\
         mcp-session-id: {session}\r\nmcp-protocol-version: {V}\r\n\r\n"
    )
    .unwrap();
    let len = 1024 - w.len();
    tcp.write_all(&request[..len]).expect("write");
    let mut head = [0u8; 4];
    tcp.read_exact(&mut head).expect("a response");
    assert_eq!(&head, b"HTTP");
    read_until(&mut tcp, b"\r\n\r\n");
    tcp
}

/// Serves on `runtime` in a thread of its own until the returned sender is dropped; gives
/// the address.
fn serve(
    runtime: Runtime,
) -> (
    SocketAddr,
    std::sync::mpsc::Sender<()>,
    std::thread::JoinHandle<()>,
) {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let run = async move {
            let config = ServerConfig::default()
                .with_max_sessions(streams() + 10)
                .with_heartbeat_interval(Some(HEARTBEAT));
            let addr = SocketAddr::from(([127, 0, 0, 1], 0));
            let serving = runtime
                .serve_on(addr, Server::new("m", "0"), config)
                .await
                .expect("serving");
            addr_tx.send(serving.local_addr()).unwrap();
            // Until the test is done (polled now and then: no runtime-specific channel).
            loop {
                if let Err(std::sync::mpsc::TryRecvError::Disconnected) = stop_rx.try_recv() {
                    break;
                }
                match runtime {
                    Runtime::Tokio => tokio::time::sleep(Duration::from_millis(20)).await,
                    Runtime::Smol => {
                        smol::Timer::after(Duration::from_millis(20)).await;
                    }
                }
            }
            serving.shutdown().await;
        };
        match runtime {
            Runtime::Tokio => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(run),
            Runtime::Smol => smol::block_on(run),
        }
    });
    (
        addr_rx.recv().expect("the server's address"),
        stop_tx,
        thread,
    )
}

fn print_histogram(label: &str, before: &[isize], after: &[isize], n: usize) {
    if std::env::var_os("MCP_GET_STREAM_HISTOGRAM").is_none() {
        return;
    }
    println!("{label}: live bytes gained per stream by allocation size");
    for (k, (a, b)) in after.iter().zip(before).enumerate() {
        let per = (a - b) as f64 / n as f64;
        if per.abs() >= 8.0 {
            let low = if k == 0 { 0 } else { (1usize << (k - 1)) + 1 };
            println!("  {low:>6}..={:<6} {per:>8.0}", 1usize << k);
        }
    }
}

fn measure(runtime: Runtime, reused: bool) -> (f64, f64) {
    let n = streams();
    let (addr, stop, server) = serve(runtime);
    let ids: Vec<String> = (0..=n).map(|_| open_session(addr)).collect();
    // One stream first, so that what the first one creates lazily is not charged.
    let mut streams = Vec::with_capacity(n + 1);
    streams.push(open_stream(addr, &ids[0], reused));
    std::thread::sleep(Duration::from_millis(100));
    let (before, before_by_size) = snapshot();
    let rss_before = rss();
    if let Some(from) = std::env::var("MCP_GET_STREAM_TRACE")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        TRACE_FROM.store(from, Ordering::Relaxed);
    }
    for id in &ids[1..] {
        streams.push(open_stream(addr, id, reused));
    }
    std::thread::sleep(Duration::from_millis(100));
    let (opened, opened_by_size) = snapshot();
    let rss_opened = rss();
    if TRACE_FROM.load(Ordering::Relaxed) > 0 {
        print_traces();
    }
    // Every stream gets a heartbeat (a comment frame).
    for tcp in &mut streams {
        read_until(tcp, b": keepalive");
    }
    std::thread::sleep(Duration::from_millis(50));
    let (beaten, beaten_by_size) = snapshot();
    let per = |after: isize| (after - before) as f64 / n as f64;
    let (at_open, after_heartbeat) = (per(opened), per(beaten));
    println!(
        "{runtime}{}: server heap per open GET stream: {at_open:.0} bytes once open, \
         {after_heartbeat:.0} after a heartbeat ({n} streams)",
        if reused { " (after a POST)" } else { "" }
    );
    println!(
        "{runtime}: process RSS per open GET stream: {:.0} bytes",
        (rss_opened - rss_before) as f64 / n as f64
    );
    print_histogram("once open", &before_by_size, &opened_by_size, n);
    print_histogram("after a heartbeat", &before_by_size, &beaten_by_size, n);
    drop(streams);
    // The server gone before the next measure starts.
    drop(stop);
    server.join().expect("the server's thread");
    (at_open, after_heartbeat)
}

fn check(runtime: Runtime, reused: bool) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (at_open, after_heartbeat) = measure(runtime, reused);
    let bound = bound(runtime, reused);
    assert!(
        at_open <= bound && after_heartbeat <= bound,
        "{runtime}: {at_open:.0} / {after_heartbeat:.0} bytes per GET stream, over {bound}"
    );
}

#[test]
fn an_open_get_stream_costs_at_most_10_kb_on_tokio() {
    check(Runtime::Tokio, false);
}

#[test]
fn an_open_get_stream_costs_at_most_10_kb_on_smol() {
    check(Runtime::Smol, false);
}

#[test]
fn a_get_stream_after_a_post_costs_hypers_buffers_and_little_more_on_tokio() {
    check(Runtime::Tokio, true);
}

#[test]
fn a_get_stream_after_a_post_costs_at_most_10_kb_on_smol() {
    check(Runtime::Smol, true);
}
