// S-POST-2, S-POST-7, S-POST-9, G-8, S-POST-12, S-RES-5, S-RES-8, S-POST-21, S-POST-23, S-NEW-3.
//! The POST-stream sub-machine: one per message the client POSTs, following its exchange
//! through the reply and, for a request whose SSE stream breaks, through the GETs that resume it.
//!
//! # Theory of operation
//!
//! A POST carries one JSON-RPC message. A notification or a response expects
//! `202 Accepted`; a request expects `200` with either one JSON body (a
//! batch when 2025-03-26 was negotiated) or an SSE stream that may carry server requests
//! and notifications before the response. The machine turns the reply into
//! [`PostEffect`]s; the facade ([`super::ClientSession`]) parses the payloads, matches responses
//! to requests by id, and tells the machine when its request was `answered`.
//!
//! An SSE stream that ends (or breaks) before its response is *resumed*: if the era has
//! resumability and an event id was seen, the machine waits (the server's `retry` as a floor,
//! jittered exponential backoff above it) and then the facade sends GET + `Last-Event-ID` under a
//! new [`super::StreamId`]; the machine follows that exchange exactly as the original. A connection
//! that brings no new event id counts as a resume failure; `max_resume_failures` of them in a row
//! fail the request (peer clients have looped forever on empty resumes, or left the request
//! pending). Without an event id, or in the modern era, the request fails.
//!
//! Once its request is answered, an SSE stream gets `answered_stream_grace` (2 s) for what may
//! follow and is then closed by the client (`Abort`): servers normally end it, but some never
//! end a resumed stream, which would hold a connection for nothing.
//!
//! Decisions taken at the response head (error statuses, 401/403, 404 with a session) leave the
//! exchange to drain in `Discard`/`ErrorBody`, bounded by `max_error_body_bytes`.
//!
//! Every change of state is in [`PostStream::handle`] (its helpers `on_head` and `broken`
//! return the next state to it); the table lists its arms, one row per outcome.
//!
//! ```text
//! state       | input                                        | next        | effects
//! ------------+----------------------------------------------+-------------+------------------------------
//! AwaitHead   | 2xx, no response expected                    | Discard     | Accepted
//! AwaitHead   | 2xx application/json (not a resume)          | Json        |
//! AwaitHead   | 2xx text/event-stream                        | Sse         | Resumed (if a resume)
//! AwaitHead   | 202 / 204, response expected                 | Discard     | Failed(UnexpectedStatus)
//! AwaitHead   | 2xx other media type, response expected      | Done        | Failed(UnexpectedContentType), Abort, Finished
//! AwaitHead   | 401, or 403 with a Bearer challenge          | Discard     | AuthRequired, Failed(AuthorizationRequired)
//! AwaitHead   | 404 and a session id was carried             | Discard     | SessionNotFound
//! AwaitHead   | 404, no session id, `initialize`             | Discard     | Failed(EndpointNotFound)
//! AwaitHead   | 405 to a resume                              | Discard     | Failed(UnexpectedStatus)
//! AwaitHead   | other status / media type to a resume        | Backoff|Done| Abort, → broken (below)
//! AwaitHead   | 429, re-sends < max, Retry-After ≤ max_wait  | RetryWait   | RateLimited
//! AwaitHead   | 429, otherwise                               | Discard     | Failed(RateLimited)
//! AwaitHead   | other status                                 | ErrorBody   |
//! AwaitHead   | Failed(kind)                                 | Done        | Failed(Transport) | → broken if a resume
//! AwaitHead   | Chunk / End before any head (adapter bug)    | Done        | Failed(Transport), Abort, Finished
//! Json        | Chunk (within max_json_body_bytes)           | Json        |
//! Json        | Chunk (over the limit)                       | Done        | Limit, Failed(LimitExceeded), Abort, Finished
//! Json        | End                                          | Done        | JsonBody, Finished
//! Json        | Failed(kind)                                 | Done        | Failed(Transport), Finished
//! Sse         | Chunk                                        | Sse         | Payloads
//! Sse         | Chunk over max_sse_event_bytes               | Done|Backoff| Limit, Abort, → broken
//! Sse         | End / Failed, answered or nothing expected   | Done        | Finished
//! Sse         | Timer, answered, grace over                  | Done        | Abort, Finished
//! Sse         | End / Failed, not answered                   | → broken    |
//! ErrorBody   | Chunk (within max_error_body_bytes)          | ErrorBody   |
//! ErrorBody   | Chunk (over the limit)                       | Done        | Limit, Failed(HttpStatus), Abort, Finished
//! ErrorBody   | End / Failed                                 | Done        | Failed(HttpStatus), Finished
//! Discard     | Chunk (within max_error_body_bytes)          | Discard     |
//! Discard     | Chunk (over)                                 | Done        | Limit, Abort, Finished
//! Discard     | End / Failed                                 | Done        | Finished
//! Sse         | Timer, grace not over (or not answered)      | Sse         |
//! RetryWait   | Chunk (ignored) / End, Failed (exchange over)| RetryWait   |
//! RetryWait   | Timer, now ≥ at                              | Done        | Resend, [Abort], Finished
//! Backoff{at} | Timer, now ≥ at                              | AwaitHead   | Resume (facade sends the GET)
//! Backoff{at} | Timer, now < at                              | Backoff{at} |
//! live        | Timer (not Sse) / second Head (stale input)  | (same)      |
//! Backoff     | Head / Chunk / End / Failed (stale input)    | Backoff     |
//! RetryWait   | Head / Timer before `at`                     | RetryWait   |
//! Done        | anything                                     | Done        |
//!
//! A 429 means the server refused the message before processing it: the facade sends the same
//! bytes again (same JSON-RPC id) under a new stream when `RetryWait` ends, unless the request
//! ended in the meantime (the facade requeues it at `RateLimited`, so a cancel sends nothing).
//!
//! broken: resumable era, an event id seen, failures ≤ max → Backoff{at}, ScheduleResume
//!         otherwise                                       → Done, [Limit(ResumeFailures)],
//!                                                           Failed(StreamEndedWithoutResponse | Transport), Finished
//! ```

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, StatusCode};

use super::backoff::{Backoff, after};
use super::config::{Limits, RateLimitRetry};
use super::error::{ClientError, Limit, ServerFault};
use super::io::TransportFailure;
use super::wire::{RequestId, SseReader};
use crate::http::{BearerChallenge, bearer_challenge, content_type_is, media_type, mime};

/// What a POST carries, which decides what its reply must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A request (the app's, or the session's own re-initialization): a response is expected.
    Request(RequestId),
    /// An app notification.
    Notification(Box<str>),
    // S-S2C-3.
    /// An app response to a server request.
    Response,
    /// The session's `notifications/initialized`.
    Initialized,
    /// The session's `notifications/cancelled`.
    Cancelled,
}

/// An input of the POST machine.
#[derive(Debug)]
pub(crate) enum PostInput<'a> {
    Head {
        status: StatusCode,
        headers: &'a HeaderMap,
    },
    Chunk(Bytes),
    End,
    Failed(TransportFailure),
    Timer,
}

/// What the facade must do.
#[derive(Debug)]
pub(crate) enum PostEffect {
    /// A 2xx to a notification or response.
    Accepted,
    /// JSON payloads of SSE message events, in order.
    Payloads(Vec<Bytes>),
    /// The complete JSON body of a request's reply.
    JsonBody(Bytes),
    /// The exchange failed; the message's owner learns why (unless already answered).
    Failed(ClientError),
    /// 404 to an exchange that carried a session id.
    SessionNotFound,
    /// 401 / 403 with a challenge.
    AuthRequired {
        status: StatusCode,
        challenge: BearerChallenge,
    },
    /// A limit was hit.
    Limit(Limit),
    /// The server evicted events this stream had not received.
    EventsLost,
    /// A resume is scheduled.
    ScheduleResume {
        at: Instant,
        delay: Duration,
        attempt: u32,
        server_retry: Option<Duration>,
    },
    /// The resume timer fired: send GET + `Last-Event-ID` now and re-key the machine.
    Resume,
    /// 429: the message is sent again at `at`.
    RateLimited {
        at: Instant,
        delay: Duration,
        attempt: u32,
        retry_after: Option<Duration>,
    },
    /// The 429 wait is over: POST the same message again.
    Resend,
    /// A resume GET was answered with a stream.
    Resumed,
    /// Drop the live exchange.
    Abort,
    /// Remove the machine.
    Finished,
}

#[derive(Debug)]
enum PostState {
    AwaitHead,
    Json {
        buf: BytesMut,
    },
    Sse(Box<SseReader>),
    Discard {
        seen: usize,
    },
    ErrorBody {
        status: StatusCode,
        buf: BytesMut,
    },
    Backoff {
        at: Instant,
    },
    /// Refused with 429: waiting to be sent again; `live` while the 429's body still flows.
    RetryWait {
        at: Instant,
        live: bool,
    },
    Done,
}

/// Per-call context lent by the facade.
pub(crate) struct PostCtx<'a> {
    pub(crate) now: Instant,
    pub(crate) limits: &'a Limits,
    pub(crate) backoff: &'a mut Backoff,
    pub(crate) max_resume_failures: u32,
    pub(crate) rate_retry: RateLimitRetry,
}

/// One POSTed message's exchange(s).
#[derive(Debug)]
pub(crate) struct PostStream {
    pub(crate) purpose: Purpose,
    /// The session id the current exchange carried.
    pub(crate) carried_session: Option<Box<str>>,
    /// The session epoch the message was sent in.
    pub(crate) epoch: u64,
    // S-BC-3.
    /// Whether this is an `initialize` (its 404 means "no endpoint").
    pub(crate) is_initialize: bool,
    /// Whether the era has resumability (legacy).
    pub(crate) resumable: bool,
    /// Set by the facade when the request's response was delivered.
    pub(crate) answered: bool,
    /// When an answered SSE stream is closed by the client.
    release_at: Option<Instant>,
    /// The `Mcp-Session-Id` of the response head, for `initialize`.
    pub(crate) head_session_id: Option<http::HeaderValue>,
    pub(crate) last_event_id: Option<Box<str>>,
    pub(crate) retry: Option<Duration>,
    resume_failures: u32,
    resuming: bool,
    state: PostState,
    /// The message as the facade posted it (before `_meta`), its JSON-RPC method, and how
    /// often it was already re-sent after an authorization: what a hold re-sends.
    pub(crate) sent: Option<(bytes::Bytes, Option<Box<str>>, u32)>,
    /// Held for authorization: its failure is not reported.
    pub(crate) held: bool,
    /// Refused for authorization once too often: its failure says so.
    pub(crate) auth_exhausted: Option<u32>,
    /// How often the message was already sent again after a 429.
    pub(crate) rate_retries: u32,
}

impl PostStream {
    pub(crate) fn new(
        purpose: Purpose,
        carried_session: Option<Box<str>>,
        epoch: u64,
        is_initialize: bool,
        resumable: bool,
    ) -> Self {
        PostStream {
            purpose,
            carried_session,
            epoch,
            is_initialize,
            resumable,
            answered: false,
            release_at: None,
            head_session_id: None,
            last_event_id: None,
            retry: None,
            resume_failures: 0,
            resuming: false,
            state: PostState::AwaitHead,
            sent: None,
            held: false,
            auth_exhausted: None,
            rate_retries: 0,
        }
    }

    fn expects_response(&self) -> bool {
        matches!(self.purpose, Purpose::Request(_))
    }

    /// The request this machine serves, if any.
    pub(crate) fn request_id(&self) -> Option<&RequestId> {
        match &self.purpose {
            Purpose::Request(id) => Some(id),
            _ => None,
        }
    }

    /// Whether an HTTP exchange is live (dropping the machine then needs an `Abort`).
    pub(crate) fn is_live(&self) -> bool {
        match self.state {
            PostState::Backoff { .. } | PostState::Done => false,
            PostState::RetryWait { live, .. } => live,
            _ => true,
        }
    }

    /// The resume deadline, if waiting for one, or the end of an answered stream's grace.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self.state {
            PostState::Backoff { at } | PostState::RetryWait { at, .. } => Some(at),
            PostState::Sse(_) => self.release_at,
            _ => None,
        }
    }

    /// The request is answered: what follows is drained, for `grace` at most on a stream.
    pub(crate) fn answer(&mut self, now: Instant, grace: Duration) {
        self.answered = true;
        self.release_at.get_or_insert(after(now, grace));
    }

    /// Whether the current exchange is a resume GET.
    pub(crate) fn is_resuming(&self) -> bool {
        self.resuming
    }

    /// The single transition function.
    pub(crate) fn handle(
        &mut self,
        input: PostInput<'_>,
        ctx: &mut PostCtx<'_>,
        fx: &mut Vec<PostEffect>,
    ) {
        let state = std::mem::replace(&mut self.state, PostState::Done);
        self.state = match (state, input) {
            (PostState::AwaitHead, PostInput::Head { status, headers }) => {
                self.on_head(status, headers, ctx, fx)
            }
            (PostState::AwaitHead, PostInput::Failed(kind)) => {
                if self.resuming {
                    self.broken(ClientError::Transport(kind), false, ctx, fx)
                } else {
                    fx.push(PostEffect::Failed(ClientError::Transport(kind)));
                    fx.push(PostEffect::Finished);
                    PostState::Done
                }
            }
            // A body or end before the head: the adapter broke the order; treat as a failure.
            (PostState::AwaitHead, PostInput::Chunk(_) | PostInput::End) => {
                fx.push(PostEffect::Failed(ClientError::Transport(
                    TransportFailure::Other,
                )));
                fx.push(PostEffect::Abort);
                fx.push(PostEffect::Finished);
                PostState::Done
            }
            (PostState::Json { mut buf }, PostInput::Chunk(chunk)) => {
                if buf.len() + chunk.len() > ctx.limits.max_json_body_bytes {
                    let limit = Limit::JsonBody;
                    fx.push(PostEffect::Limit(limit));
                    fx.push(PostEffect::Failed(
                        ServerFault::LimitExceeded { limit }.into(),
                    ));
                    fx.push(PostEffect::Abort);
                    fx.push(PostEffect::Finished);
                    PostState::Done
                } else {
                    buf.extend_from_slice(&chunk);
                    PostState::Json { buf }
                }
            }
            (PostState::Json { buf }, PostInput::End) => {
                fx.push(PostEffect::JsonBody(buf.freeze()));
                fx.push(PostEffect::Finished);
                PostState::Done
            }
            (PostState::Json { .. }, PostInput::Failed(kind)) => {
                fx.push(PostEffect::Failed(ClientError::Transport(kind)));
                fx.push(PostEffect::Finished);
                PostState::Done
            }
            (PostState::Sse(mut reader), PostInput::Chunk(chunk)) => {
                let y = reader.feed(chunk, &mut self.last_event_id, &mut self.retry);
                if y.events_lost {
                    fx.push(PostEffect::EventsLost);
                }
                if !y.payloads.is_empty() {
                    fx.push(PostEffect::Payloads(y.payloads));
                }
                match y.error {
                    None => PostState::Sse(reader),
                    Some(e) => {
                        fx.push(PostEffect::Limit(Limit::SseEvent));
                        fx.push(PostEffect::Abort);
                        self.broken(e.into(), reader.progressed, ctx, fx)
                    }
                }
            }
            (PostState::Sse(mut reader), PostInput::End) => {
                reader.finish();
                self.broken(
                    ServerFault::StreamEndedWithoutResponse.into(),
                    reader.progressed,
                    ctx,
                    fx,
                )
            }
            (PostState::Sse(reader), PostInput::Failed(kind)) => {
                self.broken(ClientError::Transport(kind), reader.progressed, ctx, fx)
            }
            (PostState::ErrorBody { status, mut buf }, PostInput::Chunk(chunk)) => {
                let room = ctx.limits.max_error_body_bytes.saturating_sub(buf.len());
                if chunk.len() > room {
                    buf.extend_from_slice(&chunk[..room]);
                    fx.push(PostEffect::Limit(Limit::ErrorBody));
                    fx.push(PostEffect::Failed(ClientError::HttpStatus {
                        status,
                        body: buf.freeze(),
                    }));
                    fx.push(PostEffect::Abort);
                    fx.push(PostEffect::Finished);
                    PostState::Done
                } else {
                    buf.extend_from_slice(&chunk);
                    PostState::ErrorBody { status, buf }
                }
            }
            (PostState::ErrorBody { status, buf }, PostInput::End | PostInput::Failed(_)) => {
                fx.push(PostEffect::Failed(ClientError::HttpStatus {
                    status,
                    body: buf.freeze(),
                }));
                fx.push(PostEffect::Finished);
                PostState::Done
            }
            (PostState::Discard { seen }, PostInput::Chunk(chunk)) => {
                let seen = seen.saturating_add(chunk.len());
                if seen > ctx.limits.max_error_body_bytes {
                    fx.push(PostEffect::Limit(Limit::ErrorBody));
                    fx.push(PostEffect::Abort);
                    fx.push(PostEffect::Finished);
                    PostState::Done
                } else {
                    PostState::Discard { seen }
                }
            }
            (PostState::Discard { .. }, PostInput::End | PostInput::Failed(_)) => {
                fx.push(PostEffect::Finished);
                PostState::Done
            }
            (PostState::Sse(reader), PostInput::Timer) => {
                if self.release_at.is_some_and(|at| ctx.now >= at) {
                    fx.push(PostEffect::Abort);
                    fx.push(PostEffect::Finished);
                    PostState::Done
                } else {
                    PostState::Sse(reader)
                }
            }
            (PostState::Backoff { at }, PostInput::Timer) => {
                if ctx.now >= at {
                    self.resuming = true;
                    fx.push(PostEffect::Resume);
                    PostState::AwaitHead
                } else {
                    PostState::Backoff { at }
                }
            }
            // Inputs that mean nothing in a state: a timer while an exchange is live, a second
            // head, late input for an exchange already given up on.
            (
                s @ (PostState::AwaitHead
                | PostState::Json { .. }
                | PostState::ErrorBody { .. }
                | PostState::Discard { .. }),
                PostInput::Timer | PostInput::Head { .. },
            ) => s,
            (s @ PostState::Sse(_), PostInput::Head { .. }) => s,
            (s @ PostState::Backoff { .. }, _) => s,
            (PostState::RetryWait { at, live }, PostInput::Timer) if ctx.now >= at => {
                fx.push(PostEffect::Resend);
                if live {
                    fx.push(PostEffect::Abort);
                }
                fx.push(PostEffect::Finished);
                PostState::Done
            }
            (PostState::RetryWait { at, .. }, PostInput::End | PostInput::Failed(_)) => {
                PostState::RetryWait { at, live: false }
            }
            (s @ PostState::RetryWait { .. }, _) => s,
            (PostState::Done, _) => PostState::Done,
        };
    }

    fn on_head(
        &mut self,
        status: StatusCode,
        headers: &HeaderMap,
        ctx: &mut PostCtx<'_>,
        fx: &mut Vec<PostEffect>,
    ) -> PostState {
        let is_sse = content_type_is(headers, mime::TEXT_EVENT_STREAM);
        let is_json = content_type_is(headers, mime::APPLICATION_JSON);
        if self.is_initialize {
            self.head_session_id = headers.get(crate::http::header::MCP_SESSION_ID).cloned();
        }
        let challenge = bearer_challenge(headers);
        if status == StatusCode::UNAUTHORIZED
            || (status == StatusCode::FORBIDDEN && challenge.is_some())
        {
            let challenge = challenge.unwrap_or_default();
            fx.push(PostEffect::AuthRequired {
                status,
                challenge: challenge.clone(),
            });
            fx.push(PostEffect::Failed(ClientError::AuthorizationRequired {
                status,
                challenge: Box::new(challenge),
            }));
            return PostState::Discard { seen: 0 };
        }
        if status == StatusCode::NOT_FOUND {
            if self.carried_session.is_some() {
                fx.push(PostEffect::SessionNotFound);
                return PostState::Discard { seen: 0 };
            }
            if self.is_initialize {
                fx.push(PostEffect::Failed(ClientError::EndpointNotFound));
                return PostState::Discard { seen: 0 };
            }
        }
        if self.resuming {
            return if status.is_success() && is_sse {
                fx.push(PostEffect::Resumed);
                PostState::Sse(Box::new(SseReader::new(ctx.limits.max_sse_event_bytes)))
            } else if status == StatusCode::METHOD_NOT_ALLOWED {
                // The server has no GET at all: this stream can never be resumed.
                fx.push(PostEffect::Failed(
                    ServerFault::UnexpectedStatus { status }.into(),
                ));
                PostState::Discard { seen: 0 }
            } else {
                fx.push(PostEffect::Abort);
                let err = if status.is_success() {
                    ServerFault::UnexpectedContentType {
                        content_type: content_type(headers),
                    }
                } else {
                    ServerFault::UnexpectedStatus { status }
                };
                self.broken(err.into(), false, ctx, fx)
            };
        }
        // 429, or 503 with `Retry-After` (a server pushing back under load, a store that is
        // behind): the server did not process the message and says when to send it again.
        if status == StatusCode::TOO_MANY_REQUESTS
            || (status == StatusCode::SERVICE_UNAVAILABLE
                && super::backoff::retry_after(headers).is_some())
        {
            return self.rate_limited(headers, ctx, fx);
        }
        if !status.is_success() {
            return PostState::ErrorBody {
                status,
                buf: BytesMut::new(),
            };
        }
        if !self.expects_response() {
            fx.push(PostEffect::Accepted);
            return PostState::Discard { seen: 0 };
        }
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            fx.push(PostEffect::Failed(
                ServerFault::UnexpectedStatus { status }.into(),
            ));
            return PostState::Discard { seen: 0 };
        }
        if is_json {
            PostState::Json {
                buf: BytesMut::new(),
            }
        } else if is_sse {
            PostState::Sse(Box::new(SseReader::new(ctx.limits.max_sse_event_bytes)))
        } else {
            fx.push(PostEffect::Failed(
                ServerFault::UnexpectedContentType {
                    content_type: content_type(headers),
                }
                .into(),
            ));
            fx.push(PostEffect::Abort);
            fx.push(PostEffect::Finished);
            PostState::Done
        }
    }

    /// 429 (or 503 with `Retry-After`): wait and send again, or fail with the delay (see
    /// [`RateLimitRetry`]).
    fn rate_limited(
        &mut self,
        headers: &HeaderMap,
        ctx: &mut PostCtx<'_>,
        fx: &mut Vec<PostEffect>,
    ) -> PostState {
        let retry_after = super::backoff::retry_after(headers);
        let allowed = self.rate_retries < ctx.rate_retry.max_retries
            && retry_after.is_none_or(|d| d <= ctx.rate_retry.max_wait);
        if !allowed {
            fx.push(PostEffect::Failed(ClientError::RateLimited {
                retry_after,
                retries: self.rate_retries,
            }));
            return PostState::Discard { seen: 0 };
        }
        let delay = match retry_after {
            Some(d) => ctx.backoff.spread(d),
            None => ctx.backoff.delay(self.rate_retries, None),
        };
        let at = after(ctx.now, delay);
        fx.push(PostEffect::RateLimited {
            at,
            delay,
            attempt: self.rate_retries + 1,
            retry_after,
        });
        PostState::RetryWait { at, live: true }
    }

    /// The stream ended or broke: finish, resume, or fail.
    fn broken(
        &mut self,
        cause: ClientError,
        progressed: bool,
        ctx: &mut PostCtx<'_>,
        fx: &mut Vec<PostEffect>,
    ) -> PostState {
        if self.answered || !self.expects_response() {
            fx.push(PostEffect::Finished);
            return PostState::Done;
        }
        if self.resumable && self.last_event_id.is_some() {
            if progressed {
                self.resume_failures = 0;
            } else {
                self.resume_failures = self.resume_failures.saturating_add(1);
            }
            if self.resume_failures <= ctx.max_resume_failures {
                let delay = ctx.backoff.delay(self.resume_failures, self.retry);
                let at = after(ctx.now, delay);
                fx.push(PostEffect::ScheduleResume {
                    at,
                    delay,
                    attempt: self.resume_failures,
                    server_retry: self.retry,
                });
                return PostState::Backoff { at };
            }
            fx.push(PostEffect::Limit(Limit::ResumeFailures));
            fx.push(PostEffect::Failed(
                ServerFault::StreamEndedWithoutResponse.into(),
            ));
        } else {
            fx.push(PostEffect::Failed(cause));
        }
        fx.push(PostEffect::Finished);
        PostState::Done
    }
}

fn content_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| media_type(v.as_bytes()))
        .map(str::to_ascii_lowercase)
}
