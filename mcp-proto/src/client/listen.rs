// S-GET-1, G-9, S-GET-2, S-GET-3, S-NEW-1, S-POST-23, S-GET-8, S-POST-20, S-RES-5, S-SSE-15,
// S-NEW-9, S-NEW-3.
//! The GET-stream sub-machine: the continuous listening stream (mcp-go:
//! `WithContinuousListening`).
//!
//! # Theory of operation
//!
//! Once the session is ready (initialize answered and `notifications/initialized` accepted)
//! and the app wants to listen, the machine opens `GET` with `Accept: text/event-stream`.
//! Every well-known peer client (mcp-go, rmcp, the TypeScript and Python SDKs) has
//! shipped a reconnect storm here; this machine is built so that it cannot:
//!
//! - **405 is final**: `ListenUnsupported`, and no GET is ever sent again by this
//!   session. An era without a GET stream (2026-07-28) is the same, without a request.
//! - **404 with a session id** is the session's business (expiry, re-initialization); the
//!   machine goes back to `Idle` and reopens when the session is ready again.
//! - **401/403** stop listening until the app calls `listen` again (after authorizing).
//! - **Everything else is a failure**: another status, a 200 that is not `text/event-stream`
//!   (the TypeScript SDK client once polled such a server at ~1 req/s for 11 hours), a
//!   transport failure, a limit hit, and a stream that ends *without a new event id* (a clean
//!   close that resets the backoff is how the Python SDK and rmcp clients looped forever). A
//!   failure schedules a reconnect after a jittered exponential delay (1 s doubling to 30 s),
//!   never sooner than the server's `retry` or `Retry-After`.
//!   `max_failures` failures inside the sliding `window` end listening with `ListenGaveUp`.
//! - A connection that brought a new event id is *progress* (e.g. a 2025-11-25 server polling
//!   with `retry`): the backoff restarts from its first step, floored by `retry`.
//! - Every reconnect carries `Last-Event-ID` when an id was seen.
//! - **The modern era** (2026-07-28) listens with a `subscriptions/listen` POST (the
//!   facade builds it, with a new id and no `Last-Event-ID`); the machine is the same
//!   but for two rules: 404 is final like 405 (the method does not exist), and since modern
//!   streams carry no event ids, a delivered message (the acknowledgement comes first) is the
//!   progress that restarts the backoff.
//!
//! The table is the `match` of [`Listen::handle`], arm for arm and in its order (an arm with
//! several outcomes has a row each); every change of state is in that function.
//!
//! ```text
//! state       | input                                    | next         | effects
//! ------------+------------------------------------------+--------------+---------------------------------
//! Unsupported | anything                                 | Unsupported  |
//! Idle        | Start, no GET in the era                 | Unsupported  | ListenUnsupported
//! Idle        | Start, GET exists in the era, wanted     | Opening      | Open(GET [+ Last-Event-ID])
//! Idle        | Start, not wanted                        | Idle         |
//! Opening     | 2xx text/event-stream                    | Open         | ListenOpened [, Resumed]
//! Opening     | 405 (or 404 in the modern era)           | Unsupported  | Abort, ListenUnsupported
//! Opening     | 401, or 403 with a Bearer challenge      | Stopped      | Abort, AuthRequired, ListenGaveUp(Auth)
//! Opening     | 404 and a session id was carried         | Idle         | Abort, SessionNotFound
//! Opening     | other status, other media type           | Backoff|Stop | Abort, → failure
//! Opening     | Failed                                   | Backoff|Stop | → failure
//! Opening     | Chunk / End before the head (adapter bug)| Backoff|Stop | Abort, → failure
//! Open        | Chunk                                    | Open         | Payloads
//! Open        | Chunk over max_sse_event_bytes           | Backoff|Stop | Abort, LimitExceeded, → failure
//! Open        | End / Failed, new event id seen (modern: | Backoff      | Reconnecting (attempt 0)
//!             |   a message delivered)                   |              |
//! Open        | End / Failed, no new event id            | Backoff|Stop | → failure
//! Backoff{at} | Timer, now ≥ at                          | Opening      | Open(GET + Last-Event-ID)
//! Backoff{at} | Timer, now < at                          | Backoff{at}  |
//! Stopped     | Suspend (session gone)                   | Stopped      | event ids forgotten
//! other       | Suspend (session gone)                   | Idle         | [Abort]; event ids forgotten
//! any         | Stop (app)                               | Idle         | [Abort]; not wanted
//! Stopped     | Restart (app `listen`)                   | Idle         | failures forgotten
//! any         | anything else (stale)                    | (same)       |
//!
//! failure: window full → Stopped, LimitExceeded(ListenFailures), ListenGaveUp(TooManyFailures)
//!          otherwise   → Backoff{now + delay(attempt, floor)}, Reconnecting; attempt += 1
//! ```

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use super::backoff::{Backoff, FailureWindow, after, retry_after};
use super::error::Limit;
use super::event::{ClientEvent, ListenStop, StreamRole};
use super::io::StreamId;
use super::wire::SseReader;
use crate::http::{BearerChallenge, bearer_challenge, content_type_is, mime};

/// An input of the listen machine.
#[derive(Debug)]
pub(crate) enum ListenInput<'a> {
    /// The session is ready and the app wants to listen; `supported` is whether the era has a
    /// listening stream (the GET, or `subscriptions/listen` with a filter); `modern` selects
    /// the 2026-07-28 rules (404 is final too; progress is a delivered message).
    Start {
        supported: bool,
        modern: bool,
    },
    Head {
        status: StatusCode,
        headers: &'a HeaderMap,
    },
    Chunk(Bytes),
    End,
    Failed,
    Timer,
    /// The session is gone (expired, re-initializing): drop the stream, forget event ids.
    Suspend,
    /// The app stopped listening.
    Stop,
    /// The app asked to listen again after `Stopped`.
    Restart,
}

/// What the facade must do.
#[derive(Debug)]
pub(crate) enum ListenEffect {
    /// Send the GET for `stream`, with `Last-Event-ID` when given.
    Open {
        stream: StreamId,
        last_event_id: Option<Box<str>>,
    },
    Abort(StreamId),
    Payloads(StreamId, Vec<Bytes>),
    Event(ClientEvent),
    /// 404 to a GET that carried a session id.
    SessionNotFound,
    AuthRequired {
        stream: StreamId,
        status: StatusCode,
        challenge: BearerChallenge,
    },
}

#[derive(Debug)]
enum ListenState {
    Idle,
    Opening {
        stream: StreamId,
    },
    Open {
        stream: StreamId,
        reader: Box<SseReader>,
    },
    Backoff {
        at: Instant,
    },
    Unsupported,
    Stopped,
}

/// Per-call context lent by the facade.
pub(crate) struct ListenCtx<'a> {
    pub(crate) now: Instant,
    pub(crate) backoff: &'a mut Backoff,
    pub(crate) next_stream: &'a mut u64,
    pub(crate) max_sse_event_bytes: usize,
}

/// The listening stream.
#[derive(Debug)]
pub(crate) struct Listen {
    /// Whether the app wants to listen.
    pub(crate) wanted: bool,
    /// The session id the current GET carried.
    pub(crate) carried_session: Option<Box<str>>,
    last_event_id: Option<Box<str>>,
    retry: Option<Duration>,
    /// The server's `Retry-After` on the last failed attempt.
    retry_after: Option<Duration>,
    attempt: u32,
    failures: FailureWindow,
    /// The modern era: `subscriptions/listen` instead of GET.
    modern: bool,
    state: ListenState,
}

impl Listen {
    pub(crate) fn new(wanted: bool, failures: FailureWindow) -> Self {
        Listen {
            wanted,
            carried_session: None,
            last_event_id: None,
            retry: None,
            retry_after: None,
            attempt: 0,
            failures,
            modern: false,
            state: ListenState::Idle,
        }
    }

    /// The live exchange, if any.
    pub(crate) fn stream(&self) -> Option<StreamId> {
        match &self.state {
            ListenState::Opening { stream } | ListenState::Open { stream, .. } => Some(*stream),
            _ => None,
        }
    }

    /// Whether the machine is waiting for the session to let it open.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.state, ListenState::Idle)
    }

    /// Whether the machine gave up (`listen` restarts it).
    pub(crate) fn is_stopped(&self) -> bool {
        matches!(self.state, ListenState::Stopped)
    }

    /// Whether the server (or the era) has no GET stream.
    pub(crate) fn is_unsupported(&self) -> bool {
        matches!(self.state, ListenState::Unsupported)
    }

    /// The reconnect deadline, if waiting for one.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self.state {
            ListenState::Backoff { at } => Some(at),
            _ => None,
        }
    }

    /// The single transition function.
    pub(crate) fn handle(
        &mut self,
        input: ListenInput<'_>,
        ctx: &mut ListenCtx<'_>,
        fx: &mut Vec<ListenEffect>,
    ) {
        let state = std::mem::replace(&mut self.state, ListenState::Idle);
        self.state = match (state, input) {
            (ListenState::Unsupported, _) => ListenState::Unsupported,
            (ListenState::Idle, ListenInput::Start { supported, modern }) => {
                self.modern = modern;
                if !supported {
                    fx.push(ListenEffect::Event(ClientEvent::ListenUnsupported));
                    ListenState::Unsupported
                } else if self.wanted {
                    self.open(ctx, fx)
                } else {
                    ListenState::Idle
                }
            }
            (ListenState::Opening { stream }, ListenInput::Head { status, headers }) => {
                self.on_head(stream, status, headers, ctx, fx)
            }
            (ListenState::Opening { .. }, ListenInput::Failed) => self.failure(ctx, fx),
            (ListenState::Opening { stream }, ListenInput::Chunk(_) | ListenInput::End) => {
                fx.push(ListenEffect::Abort(stream));
                self.failure(ctx, fx)
            }
            (ListenState::Open { stream, mut reader }, ListenInput::Chunk(chunk)) => {
                let y = reader.feed(chunk, &mut self.last_event_id, &mut self.retry);
                if y.events_lost {
                    fx.push(ListenEffect::Event(ClientEvent::EventsLost {
                        role: StreamRole::Listen,
                        stream,
                    }));
                }
                if !y.payloads.is_empty() {
                    // Modern streams carry no event ids: a delivered message (the
                    // acknowledgement comes first) is the progress.
                    if self.modern {
                        reader.progressed = true;
                    }
                    fx.push(ListenEffect::Payloads(stream, y.payloads));
                }
                if y.error.is_some() {
                    fx.push(ListenEffect::Abort(stream));
                    fx.push(ListenEffect::Event(ClientEvent::LimitExceeded {
                        stream: Some(stream),
                        limit: Limit::SseEvent,
                    }));
                    self.failure(ctx, fx)
                } else {
                    ListenState::Open { stream, reader }
                }
            }
            (ListenState::Open { mut reader, .. }, ListenInput::End | ListenInput::Failed) => {
                reader.finish();
                if reader.progressed {
                    self.attempt = 0;
                    self.schedule(ctx, fx)
                } else {
                    self.failure(ctx, fx)
                }
            }
            (ListenState::Backoff { at }, ListenInput::Timer) => {
                if ctx.now >= at {
                    self.open(ctx, fx)
                } else {
                    ListenState::Backoff { at }
                }
            }
            (state, ListenInput::Suspend) => {
                if let ListenState::Opening { stream } | ListenState::Open { stream, .. } = state {
                    fx.push(ListenEffect::Abort(stream));
                }
                self.last_event_id = None;
                self.retry = None;
                self.attempt = 0;
                match state {
                    ListenState::Stopped => ListenState::Stopped,
                    _ => ListenState::Idle,
                }
            }
            (state, ListenInput::Stop) => {
                if let ListenState::Opening { stream } | ListenState::Open { stream, .. } = state {
                    fx.push(ListenEffect::Abort(stream));
                }
                self.wanted = false;
                ListenState::Idle
            }
            (ListenState::Stopped, ListenInput::Restart) => {
                self.failures.clear();
                self.attempt = 0;
                ListenState::Idle
            }
            // Inputs that mean nothing in a state (stale input for a dropped exchange, a
            // timer or start while busy): no change.
            (
                s @ (ListenState::Idle
                | ListenState::Opening { .. }
                | ListenState::Open { .. }
                | ListenState::Backoff { .. }
                | ListenState::Stopped),
                _,
            ) => s,
        };
    }

    fn open(&mut self, ctx: &mut ListenCtx<'_>, fx: &mut Vec<ListenEffect>) -> ListenState {
        let stream = StreamId(*ctx.next_stream);
        *ctx.next_stream += 1;
        fx.push(ListenEffect::Open {
            stream,
            last_event_id: self.last_event_id.clone(),
        });
        ListenState::Opening { stream }
    }

    fn on_head(
        &mut self,
        stream: StreamId,
        status: StatusCode,
        headers: &HeaderMap,
        ctx: &mut ListenCtx<'_>,
        fx: &mut Vec<ListenEffect>,
    ) -> ListenState {
        self.retry_after = None;
        if status.is_success() && content_type_is(headers, mime::TEXT_EVENT_STREAM) {
            fx.push(ListenEffect::Event(ClientEvent::ListenOpened {
                stream,
                resumed_from: self.last_event_id.clone(),
            }));
            if let Some(last_event_id) = self.last_event_id.clone() {
                fx.push(ListenEffect::Event(ClientEvent::Resumed {
                    role: StreamRole::Listen,
                    stream,
                    last_event_id,
                }));
            }
            return ListenState::Open {
                stream,
                reader: Box::new(SseReader::new(ctx.max_sse_event_bytes)),
            };
        }
        fx.push(ListenEffect::Abort(stream));
        if status == StatusCode::METHOD_NOT_ALLOWED
            || (self.modern && status == StatusCode::NOT_FOUND)
        {
            fx.push(ListenEffect::Event(ClientEvent::ListenUnsupported));
            return ListenState::Unsupported;
        }
        let challenge = bearer_challenge(headers);
        if status == StatusCode::UNAUTHORIZED
            || (status == StatusCode::FORBIDDEN && challenge.is_some())
        {
            fx.push(ListenEffect::AuthRequired {
                stream,
                status,
                challenge: challenge.unwrap_or_default(),
            });
            fx.push(ListenEffect::Event(ClientEvent::ListenGaveUp {
                reason: ListenStop::AuthorizationRequired,
            }));
            return ListenState::Stopped;
        }
        if status == StatusCode::NOT_FOUND && self.carried_session.is_some() {
            fx.push(ListenEffect::SessionNotFound);
            return ListenState::Idle;
        }
        if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
            self.retry_after = retry_after(headers);
        }
        self.failure(ctx, fx)
    }

    fn failure(&mut self, ctx: &mut ListenCtx<'_>, fx: &mut Vec<ListenEffect>) -> ListenState {
        if self.failures.record(ctx.now) {
            let failures = self.failures.count();
            self.failures.clear();
            fx.push(ListenEffect::Event(ClientEvent::LimitExceeded {
                stream: None,
                limit: Limit::ListenFailures,
            }));
            fx.push(ListenEffect::Event(ClientEvent::ListenGaveUp {
                reason: ListenStop::TooManyFailures { failures },
            }));
            return ListenState::Stopped;
        }
        let state = self.schedule(ctx, fx);
        self.attempt = self.attempt.saturating_add(1);
        state
    }

    fn schedule(&mut self, ctx: &mut ListenCtx<'_>, fx: &mut Vec<ListenEffect>) -> ListenState {
        let floor = match (self.retry, self.retry_after.take()) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let delay = ctx.backoff.delay(self.attempt, floor);
        let at = after(ctx.now, delay);
        fx.push(ListenEffect::Event(ClientEvent::Reconnecting {
            role: StreamRole::Listen,
            at,
            delay,
            attempt: self.attempt,
            server_retry: floor,
        }));
        ListenState::Backoff { at }
    }
}
