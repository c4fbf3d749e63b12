//! Methods: their names, and the traits that tie each method to its params and result types.

use std::fmt::Debug;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::*;

/// The method names of every revision.
pub mod methods {
    /// `initialize` (legacy revisions).
    pub const INITIALIZE: &str = "initialize";
    /// `ping` (legacy revisions).
    pub const PING: &str = "ping";
    /// `resources/list`.
    pub const RESOURCES_LIST: &str = "resources/list";
    /// `resources/templates/list`.
    pub const RESOURCES_TEMPLATES_LIST: &str = "resources/templates/list";
    /// `resources/read`.
    pub const RESOURCES_READ: &str = "resources/read";
    /// `resources/subscribe` (legacy revisions).
    pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
    /// `resources/unsubscribe` (legacy revisions).
    pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";
    /// `prompts/list`.
    pub const PROMPTS_LIST: &str = "prompts/list";
    /// `prompts/get`.
    pub const PROMPTS_GET: &str = "prompts/get";
    /// `tools/list`.
    pub const TOOLS_LIST: &str = "tools/list";
    /// `tools/call`.
    pub const TOOLS_CALL: &str = "tools/call";
    /// `logging/setLevel` (legacy revisions).
    pub const LOGGING_SET_LEVEL: &str = "logging/setLevel";
    /// `completion/complete`.
    pub const COMPLETION_COMPLETE: &str = "completion/complete";
    /// `sampling/createMessage` (server to client).
    pub const SAMPLING_CREATE_MESSAGE: &str = "sampling/createMessage";
    /// `roots/list` (server to client).
    pub const ROOTS_LIST: &str = "roots/list";
    /// `elicitation/create` (server to client).
    pub const ELICITATION_CREATE: &str = "elicitation/create";
    /// `tasks/get` (the Tasks extension, SEP-2663).
    pub const TASKS_GET: &str = "tasks/get";
    /// `tasks/update` (the Tasks extension, SEP-2663).
    pub const TASKS_UPDATE: &str = "tasks/update";
    /// `tasks/cancel` (the Tasks extension, SEP-2663).
    pub const TASKS_CANCEL: &str = "tasks/cancel";
    /// `tasks/result` (2025-11-25's experimental tasks; removed by the Tasks extension, which
    /// answers it `-32601`).
    pub const TASKS_RESULT: &str = "tasks/result";
    /// `tasks/list` (2025-11-25's experimental tasks; removed by the Tasks extension, which
    /// answers it `-32601`).
    pub const TASKS_LIST: &str = "tasks/list";
    /// `server/discover` (2026-07-28).
    pub const SERVER_DISCOVER: &str = "server/discover";
    /// `subscriptions/listen` (2026-07-28).
    pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
    /// `skills/list` (the Skills extension).
    pub const SKILLS_LIST: &str = "skills/list";
    /// `skills/get` (the Skills extension).
    pub const SKILLS_GET: &str = "skills/get";
    /// `resources/directory/read` (the Skills extension, when `directoryRead` is declared).
    pub const RESOURCES_DIRECTORY_READ: &str = "resources/directory/read";

    /// `notifications/initialized` (legacy revisions).
    pub const NOTIFICATION_INITIALIZED: &str = "notifications/initialized";
    /// `notifications/cancelled`.
    pub const NOTIFICATION_CANCELLED: &str = "notifications/cancelled";
    /// `notifications/progress`.
    pub const NOTIFICATION_PROGRESS: &str = "notifications/progress";
    /// `notifications/message`.
    pub const NOTIFICATION_MESSAGE: &str = "notifications/message";
    /// `notifications/resources/list_changed`.
    pub const NOTIFICATION_RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
    /// `notifications/resources/updated`.
    pub const NOTIFICATION_RESOURCES_UPDATED: &str = "notifications/resources/updated";
    /// `notifications/prompts/list_changed`.
    pub const NOTIFICATION_PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
    /// `notifications/tools/list_changed`.
    pub const NOTIFICATION_TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
    /// `notifications/roots/list_changed` (legacy revisions).
    pub const NOTIFICATION_ROOTS_LIST_CHANGED: &str = "notifications/roots/list_changed";
    /// `notifications/elicitation/complete` (2025-11-25).
    pub const NOTIFICATION_ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";
    /// `notifications/tasks/status` (2025-11-25; not modelled).
    pub const NOTIFICATION_TASKS_STATUS: &str = "notifications/tasks/status";
    /// `notifications/subscriptions/acknowledged` (2026-07-28).
    pub const NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED: &str =
        "notifications/subscriptions/acknowledged";
}

/// A request method: its name, the type of its params and the type of its result.
///
/// Implemented by zero-sized markers ([`CallTool`], [`ListTools`], …), since several methods
/// share a params type. A typed client sends `R::Params` under `R::METHOD` and reads
/// `R::Result`; [`JsonRpcRequest<R>`] is the framed message.
///
/// In 2026-07-28 a `tools/call`, `prompts/get` or `resources/read` may answer with an
/// [`InputRequiredResult`] instead of `R::Result`; read such a response as
/// [`MaybeInputRequired<R::Result>`](MaybeInputRequired).
pub trait RequestKind: 'static {
    /// The method name.
    const METHOD: &'static str;
    /// The params type.
    type Params: Serialize + DeserializeOwned + Clone + Debug + PartialEq + Send + Sync + 'static;
    /// The result type.
    type Result: Serialize + DeserializeOwned + Clone + Debug + PartialEq + Send + Sync + 'static;
}

/// A notification method: its name and the type of its params.
pub trait NotificationKind: 'static {
    /// The method name.
    const METHOD: &'static str;
    /// The params type.
    type Params: Serialize + DeserializeOwned + Clone + Debug + PartialEq + Send + Sync + 'static;
}

macro_rules! requests {
    ($(
        $(#[$doc:meta])*
        $marker:ident, $alias:ident = $method:ident: $params:ty => $result:ty;
    )+) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $marker;

        impl RequestKind for $marker {
            const METHOD: &'static str = methods::$method;
            type Params = $params;
            type Result = $result;
        }

        #[doc = concat!("The framed `", stringify!($alias), "` message: [`JsonRpcRequest<",
            stringify!($marker), ">`](JsonRpcRequest).")]
        pub type $alias = JsonRpcRequest<$marker>;
    )+};
}

macro_rules! notifications {
    ($(
        $(#[$doc:meta])*
        $marker:ident, $alias:ident = $method:ident: $params:ty;
    )+) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $marker;

        impl NotificationKind for $marker {
            const METHOD: &'static str = methods::$method;
            type Params = $params;
        }

        #[doc = concat!("The framed `", stringify!($alias), "` message: [`JsonRpcNotification<",
            stringify!($marker), ">`](JsonRpcNotification).")]
        pub type $alias = JsonRpcNotification<$marker>;
    )+};
}

requests! {
    /// `initialize` (legacy revisions).
    Initialize, InitializeRequest = INITIALIZE: InitializeRequestParams => InitializeResult;
    /// `ping` (legacy revisions).
    Ping, PingRequest = PING: RequestParams => EmptyResult;
    /// `resources/list`.
    ListResources, ListResourcesRequest = RESOURCES_LIST: PaginatedRequestParams => ListResourcesResult;
    /// `resources/templates/list`.
    ListResourceTemplates, ListResourceTemplatesRequest = RESOURCES_TEMPLATES_LIST:
        PaginatedRequestParams => ListResourceTemplatesResult;
    /// `resources/read`.
    ReadResource, ReadResourceRequest = RESOURCES_READ: ReadResourceRequestParams => ReadResourceResult;
    /// `resources/subscribe` (legacy revisions).
    Subscribe, SubscribeRequest = RESOURCES_SUBSCRIBE: SubscribeRequestParams => EmptyResult;
    /// `resources/unsubscribe` (legacy revisions).
    Unsubscribe, UnsubscribeRequest = RESOURCES_UNSUBSCRIBE: UnsubscribeRequestParams => EmptyResult;
    /// `prompts/list`.
    ListPrompts, ListPromptsRequest = PROMPTS_LIST: PaginatedRequestParams => ListPromptsResult;
    /// `prompts/get`.
    GetPrompt, GetPromptRequest = PROMPTS_GET: GetPromptRequestParams => GetPromptResult;
    /// `tools/list`.
    ListTools, ListToolsRequest = TOOLS_LIST: PaginatedRequestParams => ListToolsResult;
    /// `tools/call`.
    CallTool, CallToolRequest = TOOLS_CALL: CallToolRequestParams => CallToolResult;
    /// `logging/setLevel` (legacy revisions).
    SetLevel, SetLevelRequest = LOGGING_SET_LEVEL: SetLevelRequestParams => EmptyResult;
    /// `completion/complete`.
    Complete, CompleteRequest = COMPLETION_COMPLETE: CompleteRequestParams => CompleteResult;
    /// `sampling/createMessage` (server to client).
    CreateMessage, CreateMessageRequest = SAMPLING_CREATE_MESSAGE:
        CreateMessageRequestParams => CreateMessageResult;
    /// `roots/list` (server to client).
    ListRoots, ListRootsRequest = ROOTS_LIST: RequestParams => ListRootsResult;
    /// `elicitation/create` (server to client).
    Elicit, ElicitRequest = ELICITATION_CREATE: ElicitRequestParams => ElicitResult;
    /// `tasks/get` (the Tasks extension).
    GetTask, GetTaskRequest = TASKS_GET: GetTaskRequestParams => GetTaskResult;
    /// `tasks/update` (the Tasks extension).
    UpdateTask, UpdateTaskRequest = TASKS_UPDATE: UpdateTaskRequestParams => EmptyResult;
    /// `tasks/cancel` (the Tasks extension).
    CancelTask, CancelTaskRequest = TASKS_CANCEL: CancelTaskRequestParams => EmptyResult;
    /// `server/discover` (2026-07-28).
    Discover, DiscoverRequest = SERVER_DISCOVER: RequestParams => DiscoverResult;
    /// `subscriptions/listen` (2026-07-28). Its result comes when the subscription ends; the
    /// notifications flow on the response stream meanwhile.
    SubscriptionsListen, SubscriptionsListenRequest = SUBSCRIPTIONS_LISTEN:
        SubscriptionsListenRequestParams => SubscriptionsListenResult;
    /// `skills/list` (the Skills extension).
    ListSkills, ListSkillsRequest = SKILLS_LIST: PaginatedRequestParams => ListSkillsResult;
    /// `skills/get` (the Skills extension).
    GetSkill, GetSkillRequest = SKILLS_GET: GetSkillRequestParams => GetSkillResult;
    /// `resources/directory/read` (the Skills extension).
    ReadDirectory, ReadDirectoryRequest = RESOURCES_DIRECTORY_READ:
        ReadDirectoryRequestParams => ReadDirectoryResult;
}

notifications! {
    /// `notifications/initialized` (legacy revisions).
    Initialized, InitializedNotification = NOTIFICATION_INITIALIZED: NotificationParams;
    /// `notifications/cancelled`.
    Cancelled, CancelledNotification = NOTIFICATION_CANCELLED: CancelledNotificationParams;
    /// `notifications/progress`.
    Progress, ProgressNotification = NOTIFICATION_PROGRESS: ProgressNotificationParams;
    /// `notifications/message`.
    LoggingMessage, LoggingMessageNotification = NOTIFICATION_MESSAGE:
        LoggingMessageNotificationParams;
    /// `notifications/resources/list_changed`.
    ResourceListChanged, ResourceListChangedNotification = NOTIFICATION_RESOURCES_LIST_CHANGED:
        NotificationParams;
    /// `notifications/resources/updated`.
    ResourceUpdated, ResourceUpdatedNotification = NOTIFICATION_RESOURCES_UPDATED:
        ResourceUpdatedNotificationParams;
    /// `notifications/prompts/list_changed`.
    PromptListChanged, PromptListChangedNotification = NOTIFICATION_PROMPTS_LIST_CHANGED:
        NotificationParams;
    /// `notifications/tools/list_changed`.
    ToolListChanged, ToolListChangedNotification = NOTIFICATION_TOOLS_LIST_CHANGED:
        NotificationParams;
    /// `notifications/roots/list_changed` (legacy revisions).
    RootsListChanged, RootsListChangedNotification = NOTIFICATION_ROOTS_LIST_CHANGED:
        NotificationParams;
    /// `notifications/elicitation/complete` (2025-11-25).
    ElicitationComplete, ElicitationCompleteNotification = NOTIFICATION_ELICITATION_COMPLETE:
        ElicitationCompleteNotificationParams;
    /// `notifications/subscriptions/acknowledged` (2026-07-28).
    SubscriptionsAcknowledged, SubscriptionsAcknowledgedNotification =
        NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED: SubscriptionsAcknowledgedNotificationParams;
}

/// `tools/call`'s response in 2026-07-28 (`CallToolResultResponse`).
pub type CallToolResultResponse = JsonRpcResultResponse<MaybeInputRequired<CallToolResult>>;
/// `prompts/get`'s response in 2026-07-28 (`GetPromptResultResponse`).
pub type GetPromptResultResponse = JsonRpcResultResponse<MaybeInputRequired<GetPromptResult>>;
/// `resources/read`'s response in 2026-07-28 (`ReadResourceResultResponse`).
pub type ReadResourceResultResponse = JsonRpcResultResponse<MaybeInputRequired<ReadResourceResult>>;
/// `completion/complete`'s response (`CompleteResultResponse`).
pub type CompleteResultResponse = JsonRpcResultResponse<CompleteResult>;
/// `server/discover`'s response (`DiscoverResultResponse`).
pub type DiscoverResultResponse = JsonRpcResultResponse<DiscoverResult>;
/// `prompts/list`'s response (`ListPromptsResultResponse`).
pub type ListPromptsResultResponse = JsonRpcResultResponse<ListPromptsResult>;
/// `resources/templates/list`'s response (`ListResourceTemplatesResultResponse`).
pub type ListResourceTemplatesResultResponse = JsonRpcResultResponse<ListResourceTemplatesResult>;
/// `resources/list`'s response (`ListResourcesResultResponse`).
pub type ListResourcesResultResponse = JsonRpcResultResponse<ListResourcesResult>;
/// `tools/list`'s response (`ListToolsResultResponse`).
pub type ListToolsResultResponse = JsonRpcResultResponse<ListToolsResult>;
/// `subscriptions/listen`'s response (`SubscriptionsListenResultResponse`).
pub type SubscriptionsListenResultResponse = JsonRpcResultResponse<SubscriptionsListenResult>;

/// `sampling/createMessage` as 2026-07-28 embeds it in an input request (`CreateMessageRequest`
/// of that revision: `{method, params}`, no JSON-RPC framing).
pub type CreateMessageInputRequest = MethodCall<CreateMessage>;
/// `elicitation/create` as 2026-07-28 embeds it in an input request.
pub type ElicitInputRequest = MethodCall<Elicit>;
/// `roots/list` as 2026-07-28 embeds it in an input request.
pub type ListRootsInputRequest = MethodCall<ListRoots>;
