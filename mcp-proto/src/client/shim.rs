//! TEMPORARY stand-in for `crate::sse`, with the agreed API, until that module is merged into
//! this branch. Deleted by the merge.
#![allow(dead_code, unreachable_pub, missing_docs)]

pub mod sse {
    use std::collections::VecDeque;
    use std::time::Duration;

    use bytes::Bytes;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct SseLimits {
        pub max_line_bytes: usize,
        pub max_event_bytes: usize,
    }

    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct SseEvent {
        pub event: Option<Box<str>>,
        pub data: Bytes,
        pub id: Option<Box<str>>,
        pub retry: Option<Duration>,
    }

    impl SseEvent {
        pub fn is_priming(&self) -> bool {
            self.data.is_empty()
        }
        pub fn is_message(&self) -> bool {
            matches!(self.event.as_deref(), None | Some("message"))
        }
    }

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum SseError {
        LineTooLong { limit: usize },
        EventTooLarge { limit: usize },
    }

    #[derive(Debug)]
    pub struct SseDecoder {
        limits: SseLimits,
        buf: Vec<u8>,
        skip_lf: bool,
        data: Vec<u8>,
        has_data: bool,
        event: Option<String>,
        last_id: String,
        id_buf: String,
        retry: Option<Duration>,
        ev_retry: Option<Duration>,
        ready: VecDeque<SseEvent>,
        error: Option<SseError>,
    }

    impl SseDecoder {
        pub fn with_limits(limits: SseLimits) -> Self {
            SseDecoder {
                limits,
                buf: Vec::new(),
                skip_lf: false,
                data: Vec::new(),
                has_data: false,
                event: None,
                last_id: String::new(),
                id_buf: String::new(),
                retry: None,
                ev_retry: None,
                ready: VecDeque::new(),
                error: None,
            }
        }

        pub fn feed_bytes(&mut self, chunk: Bytes) {
            if self.error.is_some() {
                return;
            }
            for &b in chunk.iter() {
                if self.skip_lf {
                    self.skip_lf = false;
                    if b == b'\n' {
                        continue;
                    }
                }
                if b == b'\r' || b == b'\n' {
                    self.skip_lf = b == b'\r';
                    let line = std::mem::take(&mut self.buf);
                    self.line(&line);
                    if self.error.is_some() {
                        return;
                    }
                } else {
                    self.buf.push(b);
                    if self.buf.len() > self.limits.max_line_bytes {
                        self.error = Some(SseError::LineTooLong {
                            limit: self.limits.max_line_bytes,
                        });
                        return;
                    }
                }
            }
        }

        fn line(&mut self, line: &[u8]) {
            if line.is_empty() {
                self.last_id = self.id_buf.clone();
                if self.has_data {
                    let data = Bytes::copy_from_slice(&self.data);
                    self.ready.push_back(SseEvent {
                        event: self.event.take().filter(|e| !e.is_empty()).map(Into::into),
                        data,
                        id: (!self.last_id.is_empty()).then(|| self.last_id.clone().into()),
                        retry: self.ev_retry.take(),
                    });
                }
                self.data.clear();
                self.has_data = false;
                self.event = None;
                self.ev_retry = None;
                return;
            }
            if line[0] == b':' {
                return;
            }
            let (name, value) = match line.iter().position(|&c| c == b':') {
                Some(i) => {
                    let v = &line[i + 1..];
                    (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
                }
                None => (line, &b""[..]),
            };
            match name {
                b"data" => {
                    if self.has_data {
                        self.data.push(b'\n');
                    }
                    self.has_data = true;
                    self.data.extend_from_slice(value);
                    if self.data.len() > self.limits.max_event_bytes {
                        self.error = Some(SseError::EventTooLarge {
                            limit: self.limits.max_event_bytes,
                        });
                    }
                }
                b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
                b"id" if !value.contains(&0) => {
                    self.id_buf = String::from_utf8_lossy(value).into_owned();
                }
                b"retry" => {
                    if !value.is_empty()
                        && value.iter().all(u8::is_ascii_digit)
                        && let Ok(ms) = std::str::from_utf8(value).unwrap_or("x").parse::<u64>()
                    {
                        self.retry = Some(Duration::from_millis(ms));
                        self.ev_retry = self.retry;
                    }
                }
                _ => {}
            }
        }

        pub fn finish(&mut self) {}

        pub fn next_event(&mut self) -> Result<Option<SseEvent>, SseError> {
            if let Some(e) = self.ready.pop_front() {
                return Ok(Some(e));
            }
            match &self.error {
                Some(e) => Err(e.clone()),
                None => Ok(None),
            }
        }

        pub fn last_event_id(&self) -> &str {
            &self.last_id
        }

        pub fn retry(&self) -> Option<Duration> {
            self.retry
        }
    }
}
