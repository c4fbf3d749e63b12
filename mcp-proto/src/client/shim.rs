//! TEMPORARY stand-ins for `crate::jsonrpc` and `crate::sse`, with the agreed API, until those
//! modules are merged into this branch. Deleted by the merge.
#![allow(dead_code, unreachable_pub, missing_docs)]

pub mod jsonrpc {
    use std::fmt;

    use bytes::Bytes;
    use serde_json::Value;
    use serde_json::value::RawValue;

    #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum RequestId {
        Number(i64),
        String(Box<str>),
    }

    impl fmt::Display for RequestId {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                RequestId::Number(n) => write!(f, "{n}"),
                RequestId::String(s) => write!(f, "{}", Value::from(&**s)),
            }
        }
    }

    impl From<i64> for RequestId {
        fn from(n: i64) -> Self {
            RequestId::Number(n)
        }
    }

    impl From<&str> for RequestId {
        fn from(s: &str) -> Self {
            RequestId::String(s.into())
        }
    }

    #[derive(Debug, Clone)]
    pub struct ErrorObject {
        pub code: i64,
        pub message: Box<str>,
        pub data: Option<Box<RawValue>>,
    }

    #[derive(Debug, Clone)]
    pub enum Outcome {
        Result(Box<RawValue>),
        Error(ErrorObject),
    }

    #[derive(Debug, Clone)]
    pub struct Request {
        pub id: RequestId,
        pub method: Box<str>,
        pub params: Option<Box<RawValue>>,
    }

    #[derive(Debug, Clone)]
    pub struct Notification {
        pub method: Box<str>,
        pub params: Option<Box<RawValue>>,
    }

    #[derive(Debug, Clone)]
    pub struct Response {
        pub id: Option<RequestId>,
        pub outcome: Outcome,
    }

    #[derive(Debug, Clone)]
    pub enum Message {
        Request(Request),
        Notification(Notification),
        Response(Response),
    }

    #[derive(Debug, Clone)]
    pub struct InvalidMessage {
        pub detail: String,
    }

    #[derive(Debug, Clone)]
    pub enum Body {
        Single(Message),
        Batch(Vec<Result<Message, InvalidMessage>>),
    }

    #[derive(Debug, Clone)]
    pub struct ParseFailure {
        pub detail: String,
    }

    impl fmt::Display for ParseFailure {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.detail)
        }
    }

    impl fmt::Display for InvalidMessage {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.detail)
        }
    }

    fn id_of(v: &Value) -> Result<Option<RequestId>, String> {
        match v {
            Value::Null => Ok(None),
            Value::Number(n) => n
                .as_i64()
                .map(|n| Some(RequestId::Number(n)))
                .ok_or_else(|| "bad id".to_string()),
            Value::String(s) => Ok(Some(RequestId::String(s.as_str().into()))),
            _ => Err("bad id".into()),
        }
    }

    fn raw(v: &Value) -> Box<RawValue> {
        // Serializing a Value always yields valid JSON.
        RawValue::from_string(v.to_string()).expect("valid json")
    }

    fn message_of(v: &Value) -> Result<Message, String> {
        let o = v.as_object().ok_or("not an object")?;
        if o.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err("jsonrpc must be 2.0".into());
        }
        if let Some(m) = o.get("method") {
            let method: Box<str> = m.as_str().ok_or("method must be a string")?.into();
            let params = o.get("params").map(raw);
            return match o.get("id") {
                None => Ok(Message::Notification(Notification { method, params })),
                Some(id) => match id_of(id)? {
                    Some(id) => Ok(Message::Request(Request { id, method, params })),
                    None => Err("null request id".into()),
                },
            };
        }
        let id = match o.get("id") {
            None => None,
            Some(v) => id_of(v)?,
        };
        match (o.get("result"), o.get("error")) {
            (Some(r), None) => Ok(Message::Response(Response {
                id,
                outcome: Outcome::Result(raw(r)),
            })),
            (None, Some(e)) => {
                let code = e.get("code").and_then(Value::as_i64).ok_or("error code")?;
                let message = e
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into();
                Ok(Message::Response(Response {
                    id,
                    outcome: Outcome::Error(ErrorObject {
                        code,
                        message,
                        data: e.get("data").map(raw),
                    }),
                }))
            }
            _ => Err("neither result nor error".into()),
        }
    }

    pub fn parse_body(bytes: &[u8]) -> Result<Body, ParseFailure> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| ParseFailure {
            detail: e.to_string(),
        })?;
        match &v {
            Value::Array(items) => {
                if items.is_empty() {
                    return Err(ParseFailure {
                        detail: "empty batch".into(),
                    });
                }
                Ok(Body::Batch(
                    items
                        .iter()
                        .map(|i| message_of(i).map_err(|detail| InvalidMessage { detail }))
                        .collect(),
                ))
            }
            _ => message_of(&v)
                .map(Body::Single)
                .map_err(|detail| ParseFailure { detail }),
        }
    }

    impl Message {
        pub fn to_bytes(&self) -> Bytes {
            let mut o = serde_json::Map::new();
            o.insert("jsonrpc".into(), "2.0".into());
            let idv = |id: &RequestId| match id {
                RequestId::Number(n) => Value::from(*n),
                RequestId::String(s) => Value::from(&**s),
            };
            let rv = |r: &RawValue| serde_json::from_str::<Value>(r.get()).unwrap_or(Value::Null);
            match self {
                Message::Request(r) => {
                    o.insert("id".into(), idv(&r.id));
                    o.insert("method".into(), Value::from(&*r.method));
                    if let Some(p) = &r.params {
                        o.insert("params".into(), rv(p));
                    }
                }
                Message::Notification(n) => {
                    o.insert("method".into(), Value::from(&*n.method));
                    if let Some(p) = &n.params {
                        o.insert("params".into(), rv(p));
                    }
                }
                Message::Response(r) => {
                    o.insert("id".into(), r.id.as_ref().map_or(Value::Null, idv));
                    match &r.outcome {
                        Outcome::Result(x) => {
                            o.insert("result".into(), rv(x));
                        }
                        Outcome::Error(e) => {
                            o.insert(
                                "error".into(),
                                serde_json::json!({"code": e.code, "message": &*e.message}),
                            );
                        }
                    }
                }
            }
            Bytes::from(Value::Object(o).to_string())
        }
    }
}

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
