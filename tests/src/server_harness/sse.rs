//! A small SSE frame reader for assertions: frames split on blank lines, LF only (what the
//! router writes), comments kept (the WHATWG decoder drops them, and heartbeat tests count
//! them). [`Collected::sse_messages`](super::Collected::sse_messages) cross-checks it against
//! the workspace's decoder.

/// One SSE frame as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseFrame {
    /// `id:`.
    pub id: Option<String>,
    /// `retry:` in milliseconds.
    pub retry: Option<u64>,
    /// `data:` lines joined with `\n`.
    pub data: String,
    /// A `:` comment frame (heartbeat).
    pub comment: bool,
    /// At least one `data` line (an empty one included: the priming event).
    pub data_present: bool,
}

/// Splits a body into frames.
pub fn parse_sse(body: &[u8]) -> Vec<SseFrame> {
    let text = String::from_utf8_lossy(body);
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        if block.is_empty() {
            continue;
        }
        let mut f = SseFrame::default();
        let mut data: Vec<&str> = Vec::new();
        for line in block.split('\n') {
            if line.starts_with(':') {
                f.comment = true;
                continue;
            }
            let (name, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match name {
                "id" => f.id = Some(value.to_owned()),
                "retry" => f.retry = value.parse().ok(),
                "data" => {
                    f.data_present = true;
                    data.push(value);
                }
                _ => {}
            }
        }
        f.data = data.join("\n");
        out.push(f);
    }
    out
}
