//! Messages held for authorization ([`ClientConfig::with_authorization_hold`]).
//!
//! # Theory of operation
//!
//! A POST refused with `401` (or `403` and a Bearer challenge) is normally failed at once
//! with [`ClientError::AuthorizationRequired`]. With the hold on, the message is taken out of
//! its exchange instead — the bytes the facade posted, its purpose, its JSON-RPC method, how
//! often it was already re-sent — and waits; a request's state goes back to `Queued` (its
//! deadline still runs: a timeout or a cancel removes it from the hold too), and
//! [`ClientEvent::AwaitingAuthorization`] carries the challenge. A listening stream refused
//! the same way is marked to reopen. The app (or the driver) authorizes and then calls
//! [`ClientSession::authorized`]: each held message is POSTed again, in the order it was
//! refused (queued until the session is ready if it is not, except the session's own
//! handshake messages, which go at once), and listening reopens. Or it calls
//! [`ClientSession::authorization_failed`]: each held message fails with
//! [`ClientError::Authorization`]. A message refused again after `max_retries` re-sends is
//! not held: it fails with [`AuthError::RetryLimit`](crate::auth::AuthError::RetryLimit).
//!
//! ```text
//! message (with the hold on) | event                              | next
//! ---------------------------+------------------------------------+---------------------------------
//! Sent                       | 401 / 403+Bearer, re-sends < max   | Held (AwaitingAuthorization)
//! Sent                       | 401 / 403+Bearer, re-sends = max   | failed (Authorization(RetryLimit))
//! Held                       | authorized                         | Sent again (or Queued if not ready)
//! Held                       | authorization_failed(e)            | failed (Authorization(e))
//! Held                       | timeout, cancel, close             | gone with its request
//! ```

use std::time::Instant;

use http::StatusCode;

use super::lifecycle::PhaseEvent;
use super::*;
use crate::auth::AuthError;
use crate::http::BearerChallenge;

impl ClientSession {
    /// A POST was refused for authorization: hold its message if the hold is on and it has
    /// re-sends left.
    pub(super) fn hold_for_authorization(
        &mut self,
        stream: StreamId,
        status: StatusCode,
        challenge: BearerChallenge,
    ) {
        let Some(max) = self.auth_retries else {
            return;
        };
        let Some(p) = self.posts.get_mut(&stream) else {
            return;
        };
        let Some((bytes, rpc_method, tries)) = p.sent.clone() else {
            return;
        };
        if tries >= max {
            p.auth_exhausted = Some(max);
            return;
        }
        let purpose = p.purpose.clone();
        if let Purpose::Request(id) = &purpose {
            match self.requests.get_mut(id) {
                Some(r) if r.state == (ReqState::Sent { stream }) => r.step(ReqEvent::Requeued),
                // Answered, or moved on: nothing to hold.
                _ => return,
            }
        }
        if let Some(p) = self.posts.get_mut(&stream) {
            p.held = true;
        }
        self.held.push(Held {
            message: Pending {
                bytes,
                purpose,
                rpc_method,
                auth_tries: tries + 1,
            },
            stream,
        });
        self.event(ClientEvent::AwaitingAuthorization { status, challenge });
    }

    /// A new authorization is in place (the token is set, by [`set_bearer_token`] or the
    /// token provider): every held message is sent again and a listening stream refused for
    /// authorization reopens. A no-op when nothing is held.
    ///
    /// [`set_bearer_token`]: ClientSession::set_bearer_token
    pub fn authorized(&mut self, now: Instant) {
        if self.closing() {
            return;
        }
        for h in std::mem::take(&mut self.held) {
            let m = h.message;
            if let Purpose::Request(id) = &m.purpose
                && !self.requests.contains_key(id)
            {
                continue;
            }
            let handshake = matches!(m.purpose, Purpose::Initialized)
                || (matches!(m.purpose, Purpose::Request(_))
                    && matches!(
                        m.rpc_method.as_deref(),
                        Some(wire::INITIALIZE) | Some(per_request::DISCOVER)
                    ));
            if self.phase == Phase::Ready || handshake {
                self.post_pending(m);
            } else {
                self.pending.push_back(m);
            }
        }
        if std::mem::take(&mut self.listen_held) && self.listen.wanted && self.listen.is_stopped() {
            self.run_listen(now, listen::ListenInput::Restart);
            self.maybe_start_listen(now);
        }
    }

    /// The authorization failed: every held message fails with
    /// [`ClientError::Authorization`]`(error)` (requests get it as their outcome,
    /// notifications and responses as [`ClientEvent::PostRejected`]); the listening stream
    /// stays stopped. A no-op when nothing is held.
    pub fn authorization_failed(&mut self, now: Instant, error: AuthError) {
        self.listen_held = false;
        let err = ClientError::Authorization(error);
        for h in std::mem::take(&mut self.held) {
            let stream = h.stream;
            match h.message.purpose {
                Purpose::Request(id) => {
                    let Some(req) = self.requests.get(&id) else {
                        continue;
                    };
                    if req.internal {
                        self.internal_failed(now, &id, err.clone(), false);
                        continue;
                    }
                    let was_init = &*req.method == wire::INITIALIZE;
                    self.end_request(&id, RequestResult::Failed(err.clone()), false);
                    if was_init {
                        self.step(now, PhaseEvent::InitializeFailed);
                    }
                }
                Purpose::Notification(m) => self.event(ClientEvent::PostRejected {
                    stream,
                    method: Some(m),
                    error: err.clone(),
                }),
                Purpose::Response => self.event(ClientEvent::PostRejected {
                    stream,
                    method: None,
                    error: err.clone(),
                }),
                Purpose::Initialized => {
                    self.step(now, PhaseEvent::Acknowledged(Err(err.clone())));
                }
                Purpose::Cancelled => {}
            }
        }
    }
}
