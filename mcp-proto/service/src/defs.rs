//! Builder methods and constructors for the schema types a server defines or returns:
//! [`Resource`], [`ResourceTemplate`], [`Prompt`], content blocks and resource contents. (The
//! [`Tool`](crate::schema::Tool) builder is in the `tool_schema` module.)
//!
//! They are inherent methods of the `schema` types, so `Resource::new(uri, name)
//! .description(..)` builds exactly what `resources/list` sends; no wrapper types.

use std::collections::BTreeMap;

use crate::schema::{
    AudioContent, BlobResourceContents, CallToolResult, ContentBlock, ElicitValue,
    EmbeddedResource, GetPromptResult, ImageContent, Prompt, PromptArgument, PromptMessage,
    RequestedSchema, Resource, ResourceContents, ResourceTemplate, Role, TextResourceContents,
};

impl Resource {
    /// The resource at `uri`, called `name`.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Resource {
            uri: uri.into(),
            name: name.into(),
            ..Resource::default()
        }
    }

    /// Sets `description`.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// Sets `title`.
    pub fn title(mut self, text: impl Into<String>) -> Self {
        self.title = Some(text.into());
        self
    }

    /// Sets `mimeType`.
    pub fn mime_type(mut self, mime: impl Into<String>) -> Self {
        self.mime_type = Some(mime.into());
        self
    }
}

impl ResourceTemplate {
    /// The family of resources named by the RFC 6570 template `uri_template`, called `name`.
    pub fn new(uri_template: impl Into<String>, name: impl Into<String>) -> Self {
        ResourceTemplate {
            uri_template: uri_template.into(),
            name: name.into(),
            ..ResourceTemplate::default()
        }
    }

    /// Sets `description`.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// Sets `title`.
    pub fn title(mut self, text: impl Into<String>) -> Self {
        self.title = Some(text.into());
        self
    }

    /// Sets `mimeType`.
    pub fn mime_type(mut self, mime: impl Into<String>) -> Self {
        self.mime_type = Some(mime.into());
        self
    }
}

impl Prompt {
    /// The prompt called `name`, without arguments.
    pub fn new(name: impl Into<String>) -> Self {
        Prompt {
            name: name.into(),
            ..Prompt::default()
        }
    }

    /// Sets `description`.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// Sets `title`.
    pub fn title(mut self, text: impl Into<String>) -> Self {
        self.title = Some(text.into());
        self
    }

    /// Adds an argument. A required one missing from `prompts/get` is refused with `-32602`
    /// before the handler runs.
    pub fn argument(mut self, name: impl Into<String>, description: &str, required: bool) -> Self {
        self.arguments
            .get_or_insert_with(Vec::new)
            .push(PromptArgument {
                name: name.into(),
                description: (!description.is_empty()).then(|| description.to_owned()),
                required: Some(required),
                ..PromptArgument::default()
            });
        self
    }
}

impl ContentBlock {
    /// An image block: base64 `data` of type `mime_type`.
    pub fn image(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        ContentBlock::Image(ImageContent {
            data: data.into(),
            mime_type: mime_type.into(),
            ..ImageContent::default()
        })
    }

    /// An audio block: base64 `data` of type `mime_type`.
    pub fn audio(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        ContentBlock::Audio(AudioContent {
            data: data.into(),
            mime_type: mime_type.into(),
            ..AudioContent::default()
        })
    }

    /// An embedded resource block.
    pub fn resource(contents: impl Into<ResourceContents>) -> Self {
        ContentBlock::Resource(EmbeddedResource::new(contents))
    }
}

impl ResourceContents {
    /// Text contents of the resource at `uri`.
    pub fn text(uri: impl Into<String>, text: impl Into<String>) -> Self {
        ResourceContents::Text(TextResourceContents {
            uri: uri.into(),
            text: text.into(),
            ..TextResourceContents::default()
        })
    }

    /// Binary contents (base64 `blob`) of the resource at `uri`.
    pub fn blob(uri: impl Into<String>, blob: impl Into<String>) -> Self {
        ResourceContents::Blob(BlobResourceContents {
            uri: uri.into(),
            blob: blob.into(),
            ..BlobResourceContents::default()
        })
    }

    /// The same contents with `mimeType` set.
    pub fn with_mime_type(mut self, mime: impl Into<String>) -> Self {
        let slot = match &mut self {
            ResourceContents::Text(t) => &mut t.mime_type,
            ResourceContents::Blob(b) => &mut b.mime_type,
        };
        *slot = Some(mime.into());
        self
    }

    /// The URI of the resource.
    pub fn uri(&self) -> &str {
        match self {
            ResourceContents::Text(t) => &t.uri,
            ResourceContents::Blob(b) => &b.uri,
        }
    }
}

impl CallToolResult {
    /// A successful result with these content blocks.
    pub fn new(content: Vec<ContentBlock>) -> Self {
        CallToolResult {
            content,
            ..CallToolResult::default()
        }
    }

    /// The same result with `structuredContent` set.
    pub fn with_structured(mut self, value: serde_json::Value) -> Self {
        self.structured_content = Some(value);
        self
    }

    /// The text of the first text block, if any.
    pub fn first_text(&self) -> Option<&str> {
        self.content.iter().find_map(|c| match c {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
    }
}

impl GetPromptResult {
    /// A prompt result with these messages.
    pub fn new(messages: Vec<PromptMessage>) -> Self {
        GetPromptResult {
            messages,
            ..GetPromptResult::default()
        }
    }

    /// A prompt of one user message with this text.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::new(vec![PromptMessage::new(
            Role::User,
            ContentBlock::text(text),
        )])
    }

    /// The same result with `description` set.
    pub fn with_description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }
}

impl RequestedSchema {
    /// The defaults the form's fields declare, as submitted values: what a client fills in
    /// for fields the user leaves alone (SEP-1034).
    pub fn defaults(&self) -> BTreeMap<String, ElicitValue> {
        self.properties
            .iter()
            .filter_map(|(name, field)| {
                let field = serde_json::to_value(field).ok()?;
                let value = match field.get("default")? {
                    serde_json::Value::String(s) => ElicitValue::String(s.clone()),
                    serde_json::Value::Bool(b) => ElicitValue::Boolean(*b),
                    serde_json::Value::Number(n) => match n.as_i64() {
                        Some(i) => ElicitValue::Integer(i),
                        None => ElicitValue::Number(n.as_f64()?),
                    },
                    serde_json::Value::Array(items) => ElicitValue::StringArray(
                        items
                            .iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect(),
                    ),
                    _ => return None,
                };
                Some((name.clone(), value))
            })
            .collect()
    }
}
