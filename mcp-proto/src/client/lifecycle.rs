// G-9.
//! The session phase machine: every change of [`Phase`] happens in [`ClientSession::step`].
//!
//! # Theory of operation
//!
//! The phase says whether messages may go out (`Ready`), must wait (`Uninitialized`,
//! `Initializing`, `Acknowledging`, `Reinitializing`: held until `notifications/initialized` is
//! answered), or are refused (`Closing`, `Closed`). The rest of the facade reports what happened as
//! a [`PhaseEvent`]; the one `match` below decides the next phase and performs the lifecycle's own
//! effects (POSTing `notifications/initialized`, replaying `initialize`, flushing the queue,
//! opening the listening stream, the
//! `Initialized`/`Ready`/`SessionExpired`/`Reinitialized`/`Closed` events). A pair not listed is
//! stale (an answer for a step already abandoned) and changes nothing.
//!
//! The table is the `match` of [`ClientSession::step`], arm for arm and in its order; every
//! `self.phase =` of the facade is in that function.
//!
//! ```text
//! phase           | event                                   | next            | effects
//! ----------------+-----------------------------------------+-----------------+------------------------------------
//! Uninitialized   | InitializeSent                          | Initializing    |
//! Uninitialized   | ProbeStarted (Auto/Modern era mode)     | Probing         | (POST server/discover)
//! Probing         | ProbeModern                             | Ready           | EraDetected; Initialized; the app's
//!                 |                                         |                 | initialize answered from discover; Ready;
//!                 |                                         |                 | flush queue; open subscriptions/listen
//! Probing         | ProbeLegacy                             | Initializing    | EraDetected; POST the app's initialize
//!                 |  (the app's initialize already ended)   | Uninitialized   | EraDetected
//! Probing         | ProbeFailed / InitializeFailed          | Uninitialized   | (probe dropped)
//! Initializing    | InitializeAccepted (the app's)          | Acknowledging   | Initialized; POST initialized
//! Reinitializing  | InitializeAccepted (the replay)         | Acknowledging   | Reinitialized; POST initialized
//! Initializing    | InitializeFailed                        | Uninitialized   |
//! Reinitializing  | ReinitFailed                            | Uninitialized   | ReinitializeFailed; retries fail
//! Acknowledging   | Acknowledged (answer, error or timeout) | Ready           | Ready; flush queue; open GET
//! Ready|Acknowl.  | Expired, auto re-init possible          | Reinitializing  | SessionExpired; POST saved initialize
//! Ready|Acknowl.  | Expired, otherwise                      | Uninitialized   | SessionExpired
//!                 |  (no session id to expire)              | (same)          |
//! Uninitialized   | RequestWithoutSession, auto re-init off | Uninitialized   | (the request waits for the app's initialize)
//! Uninitialized   | RequestWithoutSession, re-init possible | Reinitializing  | POST saved initialize (the request waits)
//! Uninitialized   | RequestWithoutSession, streak spent     | Uninitialized   | the request fails (SessionExpired)
//! other open      | Expired                                 | (same)          | SessionExpired (if a session id)
//! open            | CloseRequested, with a DELETE           | Closing         |
//! open            | CloseRequested, no session              | Closed          | Closed(NoSession)
//!                 |  (open: every phase but Closing/Closed, Probing included)
//! Closing         | DeleteDone                              | Closed          | Closed(reason)
//! any             | anything else (stale)                   | (same)          |
//! ```
//!
//! Expiry clears the session id, forgets the listening stream's event ids (they belong to the
//! old session) and suspends listening; re-initialization is bounded to three in a row
//! without reaching `Ready`.

use std::time::{Duration, Instant};

use http::HeaderValue;

use super::*;

/// What happened, as far as the phase is concerned.
#[derive(Debug)]
pub(super) enum PhaseEvent {
    /// The app's `initialize` was POSTed.
    InitializeSent,
    // S-NEW-10.
    /// The app's `initialize` is held while `server/discover` probes the era.
    ProbeStarted,
    /// The probe found a modern server; its answer came on `stream`.
    ProbeModern { stream: StreamId },
    /// The probe found a legacy server: the app's `initialize` goes out.
    ProbeLegacy,
    /// The probe failed (the app's `initialize` already has its outcome).
    ProbeFailed,
    /// An `initialize` (the app's, or the session's replay) was answered with a version we
    /// speak.
    InitializeAccepted {
        session: Option<Box<str>>,
        version: ProtocolVersion,
        replay: bool,
    },
    /// The app's `initialize` failed (error response, bad version, HTTP or transport failure,
    /// timeout).
    InitializeFailed,
    /// The replayed `initialize` failed.
    ReinitFailed(ClientError),
    /// `notifications/initialized` was answered, refused, or given up on.
    Acknowledged(Result<(), ClientError>),
    /// The current session id met a 404.
    Expired,
    /// The app sent a request while no session exists although one had been established
    /// (its re-initialization failed, or was not possible): it must not wait for an
    /// `initialize` nobody will send.
    RequestWithoutSession(RequestId),
    /// The app closed; the DELETE's exchange and deadline when one was sent.
    CloseRequested { delete: Option<(StreamId, Instant)> },
    /// The DELETE was answered, failed, or timed out.
    DeleteDone(CloseOutcome),
}

impl ClientSession {
    /// The single transition function of the phase machine.
    pub(super) fn step(&mut self, now: Instant, ev: PhaseEvent) {
        match (self.phase, ev) {
            (Phase::Uninitialized, PhaseEvent::InitializeSent) => {
                self.phase = Phase::Initializing;
            }
            (Phase::Uninitialized, PhaseEvent::ProbeStarted) => {
                self.phase = Phase::Probing;
            }
            (Phase::Probing, PhaseEvent::ProbeModern { stream }) => {
                let version = self.version.unwrap_or(ProtocolVersion::V2026_07_28);
                self.epoch += 1;
                self.fell_back = false;
                self.event(ClientEvent::EraDetected {
                    era: crate::version::Era::Modern,
                    version: Some(version),
                    cached: false,
                });
                if let Some(id) = self.app_init.take() {
                    let response = match &self.discovered {
                        Some(d) => per_request::initialize_result(id.clone(), version, d),
                        None => per_request::initialize_result(
                            id.clone(),
                            version,
                            &serde_json::value::RawValue::from_string("{}".into())
                                .expect("valid JSON"),
                        ),
                    };
                    self.requests.remove(&id);
                    self.outcome(id, RequestResult::Response { stream, response });
                }
                self.event(ClientEvent::Initialized {
                    session_id: None,
                    version,
                });
                self.phase = Phase::Ready;
                self.reinit_streak = 0;
                self.event(ClientEvent::Ready {
                    acknowledged: Ok(()),
                });
                while let Some(p) = self.pending.pop_front() {
                    self.post_pending(p);
                }
                self.maybe_start_listen(now);
            }
            (Phase::Probing, PhaseEvent::ProbeLegacy) => {
                self.version = None;
                self.fell_back = true;
                self.event(ClientEvent::EraDetected {
                    era: crate::version::Era::Legacy,
                    version: None,
                    cached: false,
                });
                match (self.app_init.take(), self.saved_init.clone()) {
                    // The app's initialize already ended (timed out, cancelled): nothing waits.
                    (Some(id), Some(_)) if !self.requests.contains_key(&id) => {
                        self.phase = Phase::Uninitialized;
                    }
                    (Some(id), Some(bytes)) => {
                        self.phase = Phase::Initializing;
                        self.post_message(bytes, Purpose::Request(id), Some(INITIALIZE.into()));
                    }
                    _ => self.phase = Phase::Initializing,
                }
            }
            (Phase::Probing, PhaseEvent::ProbeFailed | PhaseEvent::InitializeFailed) => {
                if let Some(id) = self.probe.take() {
                    self.end_request(&id, RequestResult::Cancelled, true);
                }
                if let Some(id) = self.app_init.take() {
                    self.end_request(&id, RequestResult::Failed(ClientError::TimedOut), true);
                }
                self.version = None;
                self.phase = Phase::Uninitialized;
            }
            (
                Phase::Initializing,
                PhaseEvent::InitializeAccepted {
                    session,
                    version,
                    replay: false,
                },
            ) => {
                self.begin_session(session, version, None);
                self.phase = Phase::Acknowledging;
                self.send_initialized(now);
            }
            (
                Phase::Reinitializing,
                PhaseEvent::InitializeAccepted {
                    session,
                    version,
                    replay: true,
                },
            ) => {
                let retried = self
                    .requests
                    .values()
                    .filter(|r| r.retried && r.state == ReqState::Queued)
                    .count();
                self.begin_session(session, version, Some(retried));
                self.phase = Phase::Acknowledging;
                self.send_initialized(now);
            }
            (Phase::Initializing, PhaseEvent::InitializeFailed) => {
                self.phase = Phase::Uninitialized;
            }
            (Phase::Reinitializing, PhaseEvent::ReinitFailed(error)) => {
                self.requests
                    .retain(|_, r| !(r.internal && &*r.method == INITIALIZE));
                self.phase = Phase::Uninitialized;
                self.session_lost = true;
                self.event(ClientEvent::ReinitializeFailed { error });
                let waiting: Vec<RequestId> = self
                    .requests
                    .iter()
                    .filter(|(_, r)| r.retried && r.state == ReqState::Queued)
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in waiting {
                    self.end_request(
                        &id,
                        RequestResult::Failed(ClientError::SessionExpired),
                        false,
                    );
                }
            }
            (Phase::Acknowledging, PhaseEvent::Acknowledged(acknowledged)) => {
                self.phase = Phase::Ready;
                self.ack_deadline = None;
                self.reinit_streak = 0;
                self.event(ClientEvent::Ready { acknowledged });
                while let Some(p) = self.pending.pop_front() {
                    self.post_pending(p);
                }
                self.maybe_start_listen(now);
            }
            (Phase::Ready | Phase::Acknowledging, PhaseEvent::Expired) => {
                if self.clear_session(now) {
                    let can_replay = self.auto_reinit
                        && self.saved_init.is_some()
                        && self.reinit_streak < MAX_REINIT_STREAK;
                    match can_replay.then(|| self.prepare_reinit(now)).flatten() {
                        Some((id, bytes)) => {
                            self.phase = Phase::Reinitializing;
                            self.post_message(bytes, Purpose::Request(id), Some(INITIALIZE.into()));
                        }
                        None => {
                            self.phase = Phase::Uninitialized;
                            self.session_lost = true;
                        }
                    }
                }
            }
            // With automatic re-initialization off, requests wait for the app's own
            // `initialize` (documented): nothing to do.
            (Phase::Uninitialized, PhaseEvent::RequestWithoutSession(_)) if !self.auto_reinit => {}
            (Phase::Uninitialized, PhaseEvent::RequestWithoutSession(id)) => {
                let can_replay =
                    self.saved_init.is_some() && self.reinit_streak < MAX_REINIT_STREAK;
                if let Some((init, bytes)) = can_replay.then(|| self.prepare_reinit(now)).flatten()
                {
                    self.phase = Phase::Reinitializing;
                    self.post_message(bytes, Purpose::Request(init), Some(INITIALIZE.into()));
                    // Failed with the session if this re-initialization fails too.
                    if let Some(r) = self.requests.get_mut(&id) {
                        r.retried = true;
                    }
                } else {
                    self.end_request(
                        &id,
                        RequestResult::Failed(ClientError::SessionExpired),
                        false,
                    );
                }
            }
            (
                Phase::Uninitialized | Phase::Probing | Phase::Initializing | Phase::Reinitializing,
                PhaseEvent::Expired,
            ) => {
                self.clear_session(now);
            }
            (
                Phase::Uninitialized
                | Phase::Probing
                | Phase::Initializing
                | Phase::Acknowledging
                | Phase::Ready
                | Phase::Reinitializing,
                PhaseEvent::CloseRequested { delete },
            ) => match delete {
                Some((stream, deadline)) => self.phase = Phase::Closing { stream, deadline },
                None => {
                    self.phase = Phase::Closed;
                    self.event(ClientEvent::Closed {
                        reason: CloseOutcome::NoSession,
                    });
                }
            },
            (Phase::Closing { .. }, PhaseEvent::DeleteDone(reason)) => {
                self.phase = Phase::Closed;
                self.event(ClientEvent::Closed { reason });
            }
            // Stale: an answer for a step already abandoned (a late initialize after a close,
            // an acknowledgement after an expiry, a second close …). Nothing changes.
            (
                Phase::Uninitialized
                | Phase::Probing
                | Phase::Initializing
                | Phase::Acknowledging
                | Phase::Ready
                | Phase::Reinitializing
                | Phase::Closing { .. }
                | Phase::Closed,
                _,
            ) => {}
        }
    }

    /// Clears the expired session id; `false` when there was none.
    fn clear_session(&mut self, now: Instant) -> bool {
        let Some(id) = self.session.take() else {
            return false;
        };
        self.epoch += 1;
        self.event(ClientEvent::SessionExpired { session_id: id });
        self.run_listen(now, ListenInput::Suspend);
        true
    }

    /// A session began (the phase becomes `Acknowledging` in [`ClientSession::step`]).
    fn begin_session(
        &mut self,
        session: Option<Box<str>>,
        version: ProtocolVersion,
        reinit: Option<usize>,
    ) {
        self.session = session.clone();
        self.version = Some(version);
        self.epoch += 1;
        self.session_lost = false;
        // Only the `initialize` right after a failed probe can mean "HTTP+SSE only".
        self.fell_back = false;
        if self.era_mode != EraMode::Legacy {
            self.set_known_era(Some(KnownEra::Legacy));
        }
        self.event(match reinit {
            None => ClientEvent::Initialized {
                session_id: session,
                version,
            },
            Some(retried) => ClientEvent::Reinitialized {
                session_id: session,
                version,
                retried,
            },
        });
    }

    // S-LIFE-4.
    /// POSTs `notifications/initialized`, bounded by the handshake timeout.
    fn send_initialized(&mut self, now: Instant) {
        self.ack_deadline = Some(after(now, self.handshake_timeout()));
        self.post_message(
            wire::initialized_notification(),
            Purpose::Initialized,
            Some(INITIALIZED.into()),
        );
    }

    /// Registers the saved `initialize` under a session-owned id and returns that id and the
    /// bytes to POST (the phase becomes `Reinitializing` in [`ClientSession::step`]); `None`
    /// if it cannot.
    fn prepare_reinit(&mut self, now: Instant) -> Option<(RequestId, Bytes)> {
        let saved = self.saved_init.clone()?;
        let id = loop {
            self.reinit_seq += 1;
            let id = RequestId::String(format!("mcp-proto-reinit-{}", self.reinit_seq).into());
            if !self.requests.contains_key(&id) {
                break id;
            }
        };
        let bytes = wire::with_id(&saved, id.clone())?;
        self.reinit_streak += 1;
        self.requests.insert(
            id.clone(),
            Req {
                method: INITIALIZE.into(),
                bytes: bytes.clone(),
                state: ReqState::Queued,
                retried: false,
                deadline: Some(after(now, self.handshake_timeout())),
                internal: true,
                epoch: self.epoch,
                rounds: 0,
                wire: None,
                inputs: None,
            },
        );
        Some((id, bytes))
    }

    /// Reads the session id and version of an `initialize` response: `Ok(None)` for a
    /// JSON-RPC error.
    #[allow(clippy::type_complexity)]
    pub(super) fn accept_initialize(
        &self,
        response: &Response,
        head_session: Option<HeaderValue>,
    ) -> Result<Option<(Option<Box<str>>, ProtocolVersion)>, ServerFault> {
        let Some(version) = wire::initialize_version(response)? else {
            return Ok(None);
        };
        let session = match head_session {
            None => None,
            Some(v) => {
                if !wire::valid_session_id(v.as_bytes(), self.limits.max_session_id_bytes) {
                    return Err(ServerFault::InvalidSessionId);
                }
                // Visible ASCII (checked above) is valid UTF-8.
                Some(String::from_utf8_lossy(v.as_bytes()).into())
            }
        };
        Ok(Some((session, version)))
    }

    /// How long the session's own steps (re-initialization, the answer to
    /// `notifications/initialized`) may take: the request timeout, or 30 s.
    pub(super) fn handshake_timeout(&self) -> Duration {
        self.request_timeout.unwrap_or(Duration::from_secs(30))
    }

    /// The session's own steps that took too long.
    pub(super) fn handshake_timeouts(&mut self, now: Instant) {
        let due = self.requests.due(now, |r| r.internal);
        for id in due {
            self.internal_failed(now, &id, ClientError::TimedOut, true);
        }
        if self.phase == Phase::Acknowledging && self.ack_deadline.is_some_and(|d| d <= now) {
            let acks: Vec<StreamId> = self
                .posts
                .iter()
                .filter(|(_, p)| p.purpose == Purpose::Initialized)
                .map(|(s, _)| *s)
                .collect();
            for s in acks {
                if self.posts.remove(&s).is_some_and(|p| p.is_live()) {
                    self.out.push_back(Output::Abort(s));
                }
            }
            self.step(now, PhaseEvent::Acknowledged(Err(ClientError::TimedOut)));
        }
    }
}
