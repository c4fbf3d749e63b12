//! Typed JSON-RPC envelopes around the schema types: a request of a known method, its
//! notification, result and error responses, and the bare `{method, params}` form the modern
//! revision uses for input requests.
//!
//! These serialize to exactly the spec's message shapes (`CallToolRequest`,
//! `CallToolResultResponse`, …) and check `jsonrpc` and `method` when deserializing. The
//! transport itself moves messages as raw JSON; these types are for the typed API and tests.

use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

use super::tags::JsonRpcVersion;
use super::{ErrorObject, JsonObject, NotificationKind, RequestId, RequestKind};

/// `{"jsonrpc": "2.0", "id": …, "method": R::METHOD, "params": …}`: a request of the method
/// `R` (the spec's `CallToolRequest` and friends).
///
/// `params` is an `Option` because several methods allow leaving it out (`ping`, the list
/// requests before 2026-07-28); a method that requires it gets `Some`.
pub struct JsonRpcRequest<R: RequestKind> {
    /// The request id.
    pub id: RequestId,
    /// The params, when present.
    pub params: Option<R::Params>,
}

impl<R: RequestKind> JsonRpcRequest<R> {
    /// A request with the given id and params.
    pub fn new(id: impl Into<RequestId>, params: R::Params) -> Self {
        Self {
            id: id.into(),
            params: Some(params),
        }
    }
}

impl<R: RequestKind> Clone for JsonRpcRequest<R> {
    fn clone(&self) -> Self {
        Self {
            id: self.id.clone(),
            params: self.params.clone(),
        }
    }
}

impl<R: RequestKind> PartialEq for JsonRpcRequest<R> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.params == other.params
    }
}

impl<R: RequestKind> fmt::Debug for JsonRpcRequest<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonRpcRequest")
            .field("method", &R::METHOD)
            .field("id", &self.id)
            .field("params", &self.params)
            .finish()
    }
}

#[derive(Serialize)]
struct RequestOut<'a, P> {
    jsonrpc: JsonRpcVersion,
    id: &'a RequestId,
    method: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
}

#[derive(Deserialize)]
struct RequestIn<P> {
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion,
    id: RequestId,
    method: String,
    params: Option<P>,
}

impl<R: RequestKind> Serialize for JsonRpcRequest<R> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RequestOut {
            jsonrpc: JsonRpcVersion,
            id: &self.id,
            method: R::METHOD,
            params: self.params.as_ref(),
        }
        .serialize(serializer)
    }
}

impl<'de, R: RequestKind> Deserialize<'de> for JsonRpcRequest<R> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = RequestIn::<R::Params>::deserialize(deserializer)?;
        check_method::<D::Error>(&wire.method, R::METHOD)?;
        Ok(Self {
            id: wire.id,
            params: wire.params,
        })
    }
}

fn check_method<E: de::Error>(got: &str, want: &'static str) -> Result<(), E> {
    if got == want {
        Ok(())
    } else {
        Err(E::invalid_value(de::Unexpected::Str(got), &want))
    }
}

/// `{"jsonrpc": "2.0", "method": N::METHOD, "params": …}`: a notification of the method `N`
/// (the spec's `CancelledNotification` and friends).
pub struct JsonRpcNotification<N: NotificationKind> {
    /// The params, when present.
    pub params: Option<N::Params>,
}

impl<N: NotificationKind> JsonRpcNotification<N> {
    /// A notification with the given params.
    pub fn new(params: N::Params) -> Self {
        Self {
            params: Some(params),
        }
    }
}

impl<N: NotificationKind> Clone for JsonRpcNotification<N> {
    fn clone(&self) -> Self {
        Self {
            params: self.params.clone(),
        }
    }
}

impl<N: NotificationKind> PartialEq for JsonRpcNotification<N> {
    fn eq(&self, other: &Self) -> bool {
        self.params == other.params
    }
}

impl<N: NotificationKind> fmt::Debug for JsonRpcNotification<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonRpcNotification")
            .field("method", &N::METHOD)
            .field("params", &self.params)
            .finish()
    }
}

#[derive(Serialize)]
struct NotificationOut<'a, P> {
    jsonrpc: JsonRpcVersion,
    method: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
}

#[derive(Deserialize)]
struct NotificationIn<P> {
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion,
    method: String,
    params: Option<P>,
}

impl<N: NotificationKind> Serialize for JsonRpcNotification<N> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        NotificationOut {
            jsonrpc: JsonRpcVersion,
            method: N::METHOD,
            params: self.params.as_ref(),
        }
        .serialize(serializer)
    }
}

impl<'de, N: NotificationKind> Deserialize<'de> for JsonRpcNotification<N> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = NotificationIn::<N::Params>::deserialize(deserializer)?;
        check_method::<D::Error>(&wire.method, N::METHOD)?;
        Ok(Self {
            params: wire.params,
        })
    }
}

/// `{"method": R::METHOD, "params": …}` without JSON-RPC framing (the spec's base `RequestKind`):
/// how 2026-07-28 writes the server-to-client requests it embeds in an
/// [`InputRequiredResult`](super::InputRequiredResult) (`CreateMessageRequest`,
/// `ElicitRequest`, `ListRootsRequest` in that revision).
pub struct MethodCall<R: RequestKind> {
    /// The params, when present.
    pub params: Option<R::Params>,
    /// Other members (an `id`, say), kept for a lossless round trip.
    pub extra: JsonObject,
}

impl<R: RequestKind> MethodCall<R> {
    /// A call with the given params.
    pub fn new(params: R::Params) -> Self {
        Self {
            params: Some(params),
            extra: JsonObject::new(),
        }
    }
}

impl<R: RequestKind> Clone for MethodCall<R> {
    fn clone(&self) -> Self {
        Self {
            params: self.params.clone(),
            extra: self.extra.clone(),
        }
    }
}

impl<R: RequestKind> PartialEq for MethodCall<R> {
    fn eq(&self, other: &Self) -> bool {
        self.params == other.params && self.extra == other.extra
    }
}

impl<R: RequestKind> fmt::Debug for MethodCall<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MethodCall")
            .field("method", &R::METHOD)
            .field("params", &self.params)
            .field("extra", &self.extra)
            .finish()
    }
}

#[derive(Serialize)]
struct MethodCallOut<'a, P> {
    method: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
    #[serde(flatten)]
    extra: &'a JsonObject,
}

#[derive(Deserialize)]
struct MethodCallIn<P> {
    method: String,
    params: Option<P>,
    #[serde(flatten)]
    extra: JsonObject,
}

impl<R: RequestKind> Serialize for MethodCall<R> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        MethodCallOut {
            method: R::METHOD,
            params: self.params.as_ref(),
            extra: &self.extra,
        }
        .serialize(serializer)
    }
}

impl<'de, R: RequestKind> Deserialize<'de> for MethodCall<R> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = MethodCallIn::<R::Params>::deserialize(deserializer)?;
        check_method::<D::Error>(&wire.method, R::METHOD)?;
        Ok(Self {
            params: wire.params,
            extra: wire.extra,
        })
    }
}

/// `{"jsonrpc": "2.0", "id": …, "result": …}` (the spec's `JSONRPCResultResponse` and its
/// typed 2026-07-28 forms such as `CallToolResultResponse`).
#[derive(Debug, Clone, PartialEq)]
pub struct JsonRpcResultResponse<T> {
    /// The id of the request answered.
    pub id: RequestId,
    /// The result.
    pub result: T,
}

#[derive(Serialize)]
struct ResultOut<'a, T> {
    jsonrpc: JsonRpcVersion,
    id: &'a RequestId,
    result: &'a T,
}

#[derive(Deserialize)]
struct ResultIn<T> {
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion,
    id: RequestId,
    result: T,
}

impl<T: Serialize> Serialize for JsonRpcResultResponse<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ResultOut {
            jsonrpc: JsonRpcVersion,
            id: &self.id,
            result: &self.result,
        }
        .serialize(serializer)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for JsonRpcResultResponse<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = ResultIn::<T>::deserialize(deserializer)?;
        Ok(Self {
            id: wire.id,
            result: wire.result,
        })
    }
}

/// `{"jsonrpc": "2.0", "id": …, "error": {code, message, data}}` (the spec's
/// `JSONRPCErrorResponse`), with `data` typed as `D`.
///
/// `id` is absent (`None`) when the request's id could not be read; a JSON `null` id reads as
/// `None` too.
#[derive(Debug, Clone)]
pub struct JsonRpcErrorResponse<D = serde_json::Value> {
    /// The id of the request answered, when known.
    pub id: Option<RequestId>,
    /// The error.
    pub error: ErrorObject<D>,
}

impl<D> PartialEq for JsonRpcErrorResponse<D>
where
    ErrorObject<D>: PartialEq,
{
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.error == other.error
    }
}

#[derive(Serialize)]
struct ErrorOut<'a, D> {
    jsonrpc: JsonRpcVersion,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a RequestId>,
    error: &'a ErrorObject<D>,
}

#[derive(Deserialize)]
struct ErrorIn<D> {
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion,
    #[serde(default)]
    id: Option<RequestId>,
    error: ErrorObject<D>,
}

impl<D: Serialize> Serialize for JsonRpcErrorResponse<D> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ErrorOut {
            jsonrpc: JsonRpcVersion,
            id: self.id.as_ref(),
            error: &self.error,
        }
        .serialize(serializer)
    }
}

impl<'de, D: DeserializeOwned> Deserialize<'de> for JsonRpcErrorResponse<D> {
    fn deserialize<De: Deserializer<'de>>(deserializer: De) -> Result<Self, De::Error> {
        let wire = ErrorIn::<D>::deserialize(deserializer)?;
        Ok(Self {
            id: wire.id,
            error: wire.error,
        })
    }
}
