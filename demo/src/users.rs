//! The user server of mcp-go's server guide: `get_user`, `create_user`, `search_users` and the
//! resource template `users://{user_id}`, on a real in-memory store.
//!
//! A created user can be fetched (tool or resource), searched (case-insensitive substring of
//! the name or email) and paged; bad input gets a tool error that says what is wrong.
//!
//! `get_user` is a typed tool: its input schema comes from a struct, its output schema
//! from [`User`], which its results carry as `structuredContent`. `create_user` and
//! `search_users` keep the guide's hand-written schemas (bounds, defaults, an email format)
//! and check the rest themselves.

use std::sync::{Arc, Mutex, PoisonError};

use mcp_service::{
    CallToolResult, Error, Json, JsonSchema, ResourceContents, ResourceTemplate, Server, Tool,
    ToolArgs, default, description, min, required, schemars,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct User {
    /// `user_1`, `user_2`, … in creation order.
    pub id: String,
    /// The name.
    pub name: String,
    /// The email address.
    pub email: String,
    /// The age in years.
    pub age: u32,
}

/// The in-memory store: users in creation order.
#[derive(Debug, Default)]
pub struct UserStore {
    users: Mutex<Vec<User>>,
}

impl UserStore {
    fn users(&self) -> std::sync::MutexGuard<'_, Vec<User>> {
        self.users.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a user; returns it with its new id.
    pub fn create(&self, name: &str, email: &str, age: u32) -> User {
        let mut users = self.users();
        let user = User {
            id: format!("user_{}", users.len() + 1),
            name: name.to_owned(),
            email: email.to_owned(),
            age,
        };
        users.push(user.clone());
        user
    }

    /// The user with this id.
    pub fn get(&self, id: &str) -> Option<User> {
        self.users().iter().find(|u| u.id == id).cloned()
    }

    /// The users whose name or email contains `query` (any case): `limit` of them from
    /// `offset`, and how many match in all.
    pub fn search(&self, query: &str, limit: usize, offset: usize) -> (Vec<User>, usize) {
        let q = query.to_lowercase();
        let matching: Vec<User> = self
            .users()
            .iter()
            .filter(|u| u.name.to_lowercase().contains(&q) || u.email.to_lowercase().contains(&q))
            .cloned()
            .collect();
        let total = matching.len();
        (
            matching.into_iter().skip(offset).take(limit).collect(),
            total,
        )
    }
}

/// Whether `email` looks like an address: one `@`, something before it, and a dot inside
/// the domain.
pub fn is_valid_email(email: &str) -> bool {
    match email.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.contains('@')
                && domain
                    .split_once('.')
                    .is_some_and(|(host, tld)| !host.is_empty() && !tld.is_empty())
                && !email.contains(char::is_whitespace)
        }
        None => false,
    }
}

/// The arguments of `get_user`: its input schema. (No doc comment on the field: the guide's
/// schema has no description there.)
#[derive(Deserialize, JsonSchema)]
struct GetUser {
    user_id: String,
}

/// The users server on a fresh store.
pub fn server() -> Server {
    server_with(Arc::default())
}

/// The users server on `store`.
pub fn server_with(store: Arc<UserStore>) -> Server {
    let (s1, s2, s3, s4) = (store.clone(), store.clone(), store.clone(), store);
    Server::new("StreamableHTTP API Server", "1.0.0")
        .tool_capabilities(true)
        .resource_capabilities(true, true)
        .typed_tool(
            Tool::new("get_user").description("Get user information"),
            move |_ctx, GetUser { user_id }| {
                let user = s1.get(&user_id);
                let user = user.ok_or_else(|| Error::new(format!("user not found: {user_id}")));
                async move { Ok(Json(user?)) }
            },
        )
        .tool(
            Tool::new("create_user")
                .description("Create a new user")
                .string("name", required().min_length(1))
                .string("email", required().format("email"))
                .number("age", min(0)),
            move |_ctx, args: ToolArgs| {
                let store = s2.clone();
                async move {
                    let name = args.get_string("name", "");
                    let email = args.get_string("email", "");
                    if !is_valid_email(&email) {
                        return Err(Error::new(format!("invalid email format: {email}")));
                    }
                    let age = args.get_f64("age", 0.0);
                    if age.fract() != 0.0 || age > f64::from(u32::MAX) {
                        return Err(Error::new(format!(
                            "age must be a whole number of years, not {age}"
                        )));
                    }
                    let user = store.create(name.trim(), &email, age as u32);
                    CallToolResult::structured(&json!({
                        "id": user.id,
                        "message": "User created successfully",
                        "user": user,
                    }))
                }
            },
        )
        .tool(
            Tool::new("search_users")
                .description("Search users with filters")
                .string("query", description("Search query"))
                .number("limit", default(10).min(1).max(100))
                .number("offset", default(0).min(0)),
            move |_ctx, args: ToolArgs| {
                let store = s3.clone();
                async move {
                    let query = args.get_string("query", "");
                    let limit = args.get_int("limit", 10);
                    let offset = args.get_int("offset", 0);
                    let (users, total) = store.search(&query, limit as usize, offset as usize);
                    CallToolResult::structured(&json!({
                        "users": users,
                        "total": total,
                        "limit": limit,
                        "offset": offset,
                        "query": query,
                    }))
                }
            },
        )
        .resource_template(
            ResourceTemplate::new("users://{user_id}", "User Profile")
                .description("User profile data")
                .mime_type("application/json"),
            move |_ctx, req| {
                let store = s4.clone();
                async move {
                    let id = req.param("user_id").unwrap_or_default();
                    let user = store
                        .get(id)
                        .ok_or_else(|| Error::resource_not_found(&req.uri))?;
                    Ok(vec![
                        ResourceContents::text(req.uri.clone(), serde_json::to_string(&user)?)
                            .with_mime_type("application/json"),
                    ])
                }
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails() {
        for ok in ["a@b.c", "john.doe@example.com"] {
            assert!(is_valid_email(ok), "{ok}");
        }
        for bad in [
            "", "a", "a@b", "@b.c", "a@.c", "a@b.", "a@@b.c", "a b@c.d", "a@b@c.d",
        ] {
            assert!(!is_valid_email(bad), "{bad}");
        }
    }

    #[test]
    fn store_search_pages() {
        let s = UserStore::default();
        for (n, e) in [
            ("Ann", "ann@x.io"),
            ("Bob", "bob@y.io"),
            ("Annie", "annie@x.io"),
        ] {
            s.create(n, e, 1);
        }
        let (page, total) = s.search("ANN", 1, 1);
        assert_eq!((page[0].name.as_str(), total), ("Annie", 2));
        assert_eq!(s.search("", 10, 0).1, 3);
        assert_eq!(s.get("user_2").map(|u| u.name), Some("Bob".into()));
    }
}
