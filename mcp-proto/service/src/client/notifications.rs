//! [`ServerNotification`] and [`Notifications`], the stream of what the server sends
//! unasked.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_channel::mpsc;
use futures_core::Stream;
use serde::de::DeserializeOwned;

use crate::schema::{
    CancelledNotificationParams, ElicitationCompleteNotificationParams,
    LoggingMessageNotificationParams, ProgressNotificationParams,
    ResourceUpdatedNotificationParams, methods,
};
use mcp_proto::jsonrpc::Notification;

/// A notification from the server, typed by method.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServerNotification {
    /// `notifications/progress` (also given to the request's progress callback).
    Progress(ProgressNotificationParams),
    /// `notifications/message`: a log message.
    Log(LoggingMessageNotificationParams),
    /// `notifications/resources/updated`: a subscribed resource changed.
    ResourceUpdated(ResourceUpdatedNotificationParams),
    /// `notifications/resources/list_changed`.
    ResourceListChanged,
    /// `notifications/tools/list_changed`.
    ToolListChanged,
    /// `notifications/prompts/list_changed`.
    PromptListChanged,
    /// `notifications/cancelled`: the server gave up on one of its requests.
    Cancelled(CancelledNotificationParams),
    /// `notifications/elicitation/complete`: a URL-mode elicitation finished.
    ElicitationComplete(ElicitationCompleteNotificationParams),
    /// Any other notification, or one whose params did not parse, as received.
    Other(Notification),
}

fn typed<T: DeserializeOwned>(n: &Notification) -> Option<T> {
    serde_json::from_str(n.params.as_deref().map_or("{}", |p| p.get())).ok()
}

impl ServerNotification {
    /// Types a notification by its method; unknown methods and unreadable params give
    /// [`ServerNotification::Other`].
    pub fn from_notification(n: Notification) -> Self {
        let parsed = match &*n.method {
            methods::NOTIFICATION_PROGRESS => typed(&n).map(Self::Progress),
            methods::NOTIFICATION_MESSAGE => typed(&n).map(Self::Log),
            methods::NOTIFICATION_RESOURCES_UPDATED => typed(&n).map(Self::ResourceUpdated),
            methods::NOTIFICATION_RESOURCES_LIST_CHANGED => Some(Self::ResourceListChanged),
            methods::NOTIFICATION_TOOLS_LIST_CHANGED => Some(Self::ToolListChanged),
            methods::NOTIFICATION_PROMPTS_LIST_CHANGED => Some(Self::PromptListChanged),
            methods::NOTIFICATION_CANCELLED => typed(&n).map(Self::Cancelled),
            methods::NOTIFICATION_ELICITATION_COMPLETE => typed(&n).map(Self::ElicitationComplete),
            _ => None,
        };
        parsed.unwrap_or(Self::Other(n))
    }
}

/// The server's notifications, in arrival order, from the moment
/// [`Client::notifications`](super::Client::notifications) was called. A [`Stream`]; ends
/// when the client is closed.
#[derive(Debug)]
pub struct Notifications {
    pub(crate) rx: mpsc::UnboundedReceiver<ServerNotification>,
}

impl Notifications {
    /// The next notification, waiting for it; `None` once the client is closed.
    pub async fn next(&mut self) -> Option<ServerNotification> {
        std::future::poll_fn(|cx| Pin::new(&mut self.rx).poll_next(cx)).await
    }

    /// The next notification if one has arrived, without waiting.
    pub fn try_next(&mut self) -> Option<ServerNotification> {
        self.rx.try_recv().ok()
    }

    /// Every notification that has arrived, without waiting.
    pub fn drain(&mut self) -> Vec<ServerNotification> {
        std::iter::from_fn(|| self.try_next()).collect()
    }
}

impl Stream for Notifications {
    type Item = ServerNotification;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.rx).poll_next(cx)
    }
}

/// The stream of the transport's events, from [`Client::events`](super::Client::events).
#[derive(Debug)]
pub struct Events {
    pub(crate) rx: mpsc::UnboundedReceiver<mcp_proto::client::ClientEvent>,
}

impl Events {
    /// The next event, waiting for it; `None` once the client is closed.
    pub async fn next(&mut self) -> Option<mcp_proto::client::ClientEvent> {
        std::future::poll_fn(|cx| Pin::new(&mut self.rx).poll_next(cx)).await
    }

    /// The next event if one has arrived, without waiting.
    pub fn try_next(&mut self) -> Option<mcp_proto::client::ClientEvent> {
        self.rx.try_recv().ok()
    }

    /// Every event that has arrived, without waiting.
    pub fn drain(&mut self) -> Vec<mcp_proto::client::ClientEvent> {
        std::iter::from_fn(|| self.try_next()).collect()
    }
}

impl Stream for Events {
    type Item = mcp_proto::client::ClientEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.rx).poll_next(cx)
    }
}
