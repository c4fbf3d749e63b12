//! Throughput of the SSE decoder against `sse-stream` 0.3 and a bare `memchr2` line scan.
//!
//! `cargo bench -p mcp-proto --bench sse` (release profile). Everything runs in one process
//! over the same buffers:
//!
//! - workloads: 64 MiB of MCP-like events (`id:` + `data:` with about 200 B of JSON);
//!   64 MiB of 64 KiB events (64 KiB on the wire, so 64 KiB chunks hold one event each);
//!   and 64 MiB of events with 64 KiB of *data* (64 KiB + 8 B on the wire, so every event
//!   straddles a 64 KiB chunk boundary and must be copied together);
//! - chunkings: 64 KiB chunks and 7-byte chunks;
//! - parsers: ours through `feed_bytes` (owned `Bytes` chunks, sliced off one buffer: the
//!   zero-copy path) and through `feed` (borrowed slices, copied in); `sse-stream` 0.3 fed
//!   the same chunks as an `http_body::Body` (`StreamBody` over the slices) and polled with
//!   a no-op waker; and `memchr2` over CR/LF on the same chunks, the floor any line-based
//!   parser has to pay.
//!
//! Each cell is the median of `SSE_BENCH_RUNS` samples (default 7) in MB/s (10^6 bytes/s);
//! a sample repeats the workload until it lasts at least 0.3 s, and samples of all parsers
//! are interleaved. Rates are given by thread CPU time (robust on a shared machine) and by
//! wall-clock time.
//! Event counts are checked to be equal across parsers, so nobody skips work.
//! `SSE_BENCH_MIB` shrinks or grows the workloads (default 64); `SSE_BENCH_ONLY=<text>` runs
//! only the cells whose `parser | workload | chunk` name contains `<text>` (for profiling),
//! e.g. `SSE_BENCH_ONLY='feed_bytes | MCP ~200 B events | 64 KiB'`.

use std::convert::Infallible;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use futures_util::Stream;
use http_body::Frame;
use http_body_util::StreamBody;
use mcp_proto::sse::SseDecoder;

/// Builds about `total` bytes of MCP-like events: `id:` plus a ~200-byte JSON `data:` line.
fn mcp_workload(total: usize) -> (Bytes, usize) {
    let mut out = Vec::with_capacity(total + 512);
    let mut n = 0usize;
    while out.len() < total {
        let seq = n;
        let event = format!(
            "id: 3f2a9c/{seq}\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\
             \"params\":{{\"progressToken\":\"tok-{tok}\",\"progress\":{seq},\"total\":1000000,\
             \"message\":\"Processed {seq} of 1000000 items ({pct}%)\"}}}}\n\n",
            tok = seq % 97,
            pct = seq / 10_000,
        );
        out.extend_from_slice(event.as_bytes());
        n += 1;
    }
    (Bytes::from(out), n)
}

/// Builds about `total` bytes of events carrying `data_len` bytes of (JSON-string-like)
/// data each, framed as `data: <data>\n\n`.
fn big_workload(total: usize, data_len: usize) -> (Bytes, usize) {
    let payload: Vec<u8> = (0..data_len)
        .map(|i| match i % 64 {
            0 => b'"',
            63 => b',',
            k => b'a' + (k % 26) as u8,
        })
        .collect();
    let mut out = Vec::with_capacity(total + payload.len() + 16);
    let mut n = 0usize;
    while out.len() < total {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(&payload);
        out.extend_from_slice(b"\n\n");
        n += 1;
    }
    (Bytes::from(out), n)
}

/// Our decoder over owned chunks sliced off `data`.
fn ours_feed_bytes(data: &Bytes, chunk: usize) -> usize {
    let mut dec = SseDecoder::new();
    let mut events = 0usize;
    let mut at = 0;
    while at < data.len() {
        let end = (at + chunk).min(data.len());
        dec.feed_bytes(data.slice(at..end));
        at = end;
        while let Some(ev) = dec.next_event().expect("valid stream") {
            black_box(&ev);
            events += 1;
        }
    }
    dec.finish();
    while let Some(ev) = dec.next_event().expect("valid stream") {
        black_box(&ev);
        events += 1;
    }
    events
}

/// Our decoder over borrowed chunks of `data` (copied in).
fn ours_feed(data: &[u8], chunk: usize) -> usize {
    let mut dec = SseDecoder::new();
    let mut events = 0usize;
    for piece in data.chunks(chunk) {
        dec.feed(piece);
        while let Some(ev) = dec.next_event().expect("valid stream") {
            black_box(&ev);
            events += 1;
        }
    }
    dec.finish();
    while let Some(ev) = dec.next_event().expect("valid stream") {
        black_box(&ev);
        events += 1;
    }
    events
}

/// `sse-stream` 0.3 over the same chunks, as an `http_body::Body`.
fn sse_stream(data: &[u8], chunk: usize) -> usize {
    let frames = futures_util::stream::iter(
        data.chunks(chunk)
            .map(|piece| Ok::<_, Infallible>(Frame::data(piece))),
    );
    let mut stream = sse_stream::SseStream::new(StreamBody::new(frames));
    let mut cx = Context::from_waker(Waker::noop());
    let mut events = 0usize;
    loop {
        match Pin::new(&mut stream).poll_next(&mut cx) {
            Poll::Ready(Some(Ok(sse))) => {
                black_box(&sse);
                events += 1;
            }
            Poll::Ready(Some(Err(e))) => panic!("sse-stream error: {e}"),
            Poll::Ready(None) => break,
            Poll::Pending => unreachable!("an iterator-backed body is always ready"),
        }
    }
    events
}

/// The floor: find every CR and LF in the same chunks, nothing else.
fn memchr_scan(data: &[u8], chunk: usize) -> usize {
    let mut line_ends = 0usize;
    for piece in data.chunks(chunk) {
        line_ends += memchr::memchr2_iter(b'\r', b'\n', black_box(piece)).count();
    }
    line_ends
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// CPU time of this thread in nanoseconds (Linux `/proc/thread-self/schedstat`), so that a
/// shared, overloaded machine does not charge other processes' time to the parser. The
/// kernel updates this figure at scheduler ticks, so samples are made long enough (see
/// [`SAMPLE_SECS`]) for a tick or two of error not to matter.
fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// Shortest sample when benchmarking: fast cells repeat their workload until a sample
/// lasts this long.
const SAMPLE_SECS: f64 = 0.3;

/// One parser on one workload and chunking.
struct Cell<'a> {
    run: Box<dyn FnMut() -> usize + 'a>,
    expect: usize,
    reps: usize,
    cpu: Vec<f64>,
    wall: Vec<f64>,
}

impl<'a> Cell<'a> {
    fn new(enabled: bool, expect: usize, run: impl FnMut() -> usize + 'a) -> Option<Self> {
        enabled.then(|| Cell {
            run: Box::new(run),
            expect,
            reps: 1,
            cpu: Vec::new(),
            wall: Vec::new(),
        })
    }
}

/// Runs every cell once as a warm-up (checking its result and choosing its repetitions),
/// then `runs` rounds of all cells in turn, so that noise hits all parsers alike. Returns
/// (CPU-time, wall-clock) median MB/s per cell.
fn measure(
    runs: usize,
    sample_secs: f64,
    bytes: usize,
    cells: &mut [Option<Cell<'_>>],
) -> Vec<(f64, f64)> {
    for cell in cells.iter_mut().flatten() {
        let t = Instant::now();
        assert_eq!((cell.run)(), cell.expect, "warm-up result");
        let secs = t.elapsed().as_secs_f64().max(1e-6);
        cell.reps = ((sample_secs / secs).ceil() as usize).clamp(1, 1000);
    }
    for _ in 0..runs {
        for cell in cells.iter_mut().flatten() {
            let cpu0 = thread_cpu_ns();
            let wall0 = Instant::now();
            for _ in 0..cell.reps {
                let got = black_box((cell.run)());
                assert_eq!(got, cell.expect);
            }
            let wall = wall0.elapsed().as_secs_f64();
            let cpu = match (cpu0, thread_cpu_ns()) {
                (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e9,
                _ => wall,
            };
            let total = (bytes * cell.reps) as f64;
            cell.cpu.push(total / cpu / 1e6);
            cell.wall.push(total / wall / 1e6);
        }
    }
    cells
        .iter_mut()
        .map(|c| match c {
            Some(c) => (
                median(std::mem::take(&mut c.cpu)),
                median(std::mem::take(&mut c.wall)),
            ),
            None => (f64::NAN, f64::NAN),
        })
        .collect()
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then do a tiny run.
    let benching = std::env::args().any(|a| a == "--bench");
    let mib = env_usize("SSE_BENCH_MIB", if benching { 64 } else { 1 });
    let runs = env_usize("SSE_BENCH_RUNS", if benching { 7 } else { 1 }).max(1);
    let sample_secs = if benching { SAMPLE_SECS } else { 0.0 };
    let total = mib * 1024 * 1024;
    // `SSE_BENCH_ONLY=<text>` runs only the matching cells, for profiling.
    let only = std::env::var("SSE_BENCH_ONLY").unwrap_or_default();

    let workloads = [
        ("MCP ~200 B events", mcp_workload(total)),
        // Exactly 64 KiB on the wire: with 64 KiB chunks, every event is one chunk.
        ("64 KiB events", big_workload(total, 64 * 1024 - 8)),
        // 64 KiB of data, 8 bytes of framing: every event straddles a chunk boundary, so
        // each data line must be copied together (any parser that hands out contiguous
        // data has to).
        ("64 KiB data (straddling)", big_workload(total, 64 * 1024)),
    ];

    let mut cpu_table = Vec::new();
    let mut wall_table = Vec::new();
    for (name, (data, events)) in &workloads {
        let line_ends = memchr_scan(data, data.len());
        for chunk in [64 * 1024, 7] {
            let chunk_name = if chunk == 7 {
                "7 B".to_owned()
            } else {
                format!("{} KiB", chunk / 1024)
            };
            let on = |parser: &str| format!("{parser} | {name} | {chunk_name}").contains(&only);
            let mut cells = [
                Cell::new(on("ours feed_bytes"), *events, move || {
                    ours_feed_bytes(data, chunk)
                }),
                Cell::new(on("ours feed"), *events, move || ours_feed(data, chunk)),
                Cell::new(on("sse-stream"), *events, move || sse_stream(data, chunk)),
                Cell::new(on("memchr"), line_ends, move || memchr_scan(data, chunk)),
            ];
            let r = measure(runs, sample_secs, data.len(), &mut cells);
            for (table, pick) in [
                (
                    &mut cpu_table,
                    (|x: (f64, f64)| x.0) as fn((f64, f64)) -> f64,
                ),
                (&mut wall_table, |x: (f64, f64)| x.1),
            ] {
                let [fb, fd, ss, mc] = [pick(r[0]), pick(r[1]), pick(r[2]), pick(r[3])];
                let best = fb.max(fd);
                table.push(format!(
                    "| {name} | {chunk_name} | {fb:.0} | {fd:.0} | {ss:.0} | {mc:.0} | {:.2}x | {:.2}x |",
                    best / ss,
                    best / mc,
                ));
            }
        }
    }

    println!(
        "SSE decode throughput in MB/s (10^6 B/s), median of {runs} interleaved runs, \
         {mib} MiB per workload.\n\
         ours = mcp_proto::sse::SseDecoder; sse-stream 0.3 via http_body StreamBody; \
         memchr = memchr2 CR/LF scan of the same chunks."
    );
    let header = "| workload | chunk | ours feed_bytes | ours feed | sse-stream | memchr | best ours / sse-stream | best ours / memchr |\n|---|---|---:|---:|---:|---:|---:|---:|";
    println!("\nBy thread CPU time (robust to other processes on a shared machine):\n{header}");
    for row in &cpu_table {
        println!("{row}");
    }
    println!("\nBy wall-clock time:\n{header}");
    for row in &wall_table {
        println!("{row}");
    }
}
