//! The command-line options that put a demo server into a cluster of instances (the users
//! examples of both adapters and the tests' `mcp-everything` take them):
//!
//! ```text
//! --store redis://HOST:PORT[/DB]   share sessions, streams and the bus through this Redis
//! --instance NAME                  this instance's name in logs and ids (letters and digits;
//!                                  default "mcp"; the driver adds a random incarnation)
//! --state-key-file FILE            the requestState sealing key (at least 32 bytes), shared by
//!                                  every instance a multi-round retry may reach; or the
//!                                  environment variable MCP_STATE_KEY
//! ```
//!
//! Without `--store` the server keeps everything in memory, as a single instance does. The
//! key is read from a file or the environment, never from the command line (which other users
//! of the machine can read in the process list).

use std::sync::Arc;

use mcp_driver::{ClusterBackend, DriverConfig};
use mcp_proto::server::{ClusterConfig, ServerConfig};
use mcp_service::Server;
use mcp_service::server::seal::StateKeys;

/// The environment variable holding the shared requestState key.
pub const STATE_KEY_ENV: &str = "MCP_STATE_KEY";

/// The usage lines of these options, for a binary's `--help`.
pub const USAGE: &str =
    "  --store URL           redis://HOST:PORT: sessions, streams and the bus shared by instances
  --instance NAME       this instance's name (letters and digits; default mcp)
  --state-key-file FILE the requestState sealing key shared by instances (or $MCP_STATE_KEY)";

/// The options as parsed ([`ScaleOut::take`] each argument, then [`ScaleOut::apply`]).
#[derive(Debug, Default, Clone)]
pub struct ScaleOut {
    store: Option<String>,
    instance: Option<String>,
    key_file: Option<String>,
}

impl ScaleOut {
    /// Consumes `flag` (and its value from `rest`) when it is one of these options: `Ok(true)`;
    /// `Ok(false)` when it is not.
    ///
    /// # Errors
    ///
    /// A flag without its value.
    pub fn take(
        &mut self,
        flag: &str,
        rest: &mut impl Iterator<Item = String>,
    ) -> Result<bool, String> {
        let slot = match flag {
            "--store" => &mut self.store,
            "--instance" => &mut self.instance,
            "--state-key-file" => &mut self.key_file,
            _ => return Ok(false),
        };
        *slot = Some(rest.next().ok_or_else(|| format!("{flag} needs a value"))?);
        Ok(true)
    }

    /// The Redis URL given with `--store`.
    pub fn store(&self) -> Option<&str> {
        self.store.as_deref()
    }

    /// A line saying how this instance keeps its state, for the startup banner.
    pub fn describe(&self) -> String {
        match &self.store {
            Some(url) => format!(
                "instance {}, store {url}",
                self.instance.as_deref().unwrap_or("mcp")
            ),
            None => "state in memory".to_owned(),
        }
    }

    /// The sealing key, from `--state-key-file` or [`STATE_KEY_ENV`] (`None`: neither).
    ///
    /// # Errors
    ///
    /// The file cannot be read, or the key is shorter than 32 bytes.
    pub fn state_keys(&self) -> Result<Option<StateKeys>, String> {
        let key = match &self.key_file {
            Some(path) => {
                let bytes = std::fs::read(path)
                    .map_err(|e| format!("cannot read the state key file {path}: {e}"))?;
                // A trailing newline (`openssl rand -hex 32 > key`) is not part of the key.
                let end = bytes
                    .iter()
                    .rposition(|b| !b.is_ascii_whitespace())
                    .map_or(0, |i| i + 1);
                bytes[..end].to_vec()
            }
            None => match std::env::var_os(STATE_KEY_ENV) {
                Some(v) => v.into_encoded_bytes(),
                None => return Ok(None),
            },
        };
        StateKeys::new(key).map(Some).map_err(|e| e.to_string())
    }

    /// Puts `server`, `config` and `driver` into the cluster these options name: the backend
    /// from `backend(url)` (the adapter's `redis_backend`) in the driver's configuration, the
    /// instance name in the core's, the shared key in the server.
    ///
    /// # Errors
    ///
    /// A bad instance name, URL or key.
    pub fn apply(
        &self,
        mut server: Server,
        mut config: ServerConfig,
        mut driver: DriverConfig,
        backend: impl FnOnce(&str) -> Result<Arc<dyn ClusterBackend>, String>,
    ) -> Result<(Server, ServerConfig, DriverConfig), String> {
        if let Some(keys) = self.state_keys()? {
            server = server.request_state_keys(keys);
        }
        match &self.store {
            Some(url) => {
                let name = self.instance.as_deref().unwrap_or("mcp");
                let cluster = ClusterConfig::new(name)
                    .map_err(|e| format!("bad --instance {name:?}: {e}"))?;
                let backend = backend(url).map_err(|e| format!("bad --store {url:?}: {e}"))?;
                config = config.with_cluster(cluster);
                driver = driver.with_cluster_backend(backend);
            }
            None if self.instance.is_some() => {
                return Err("--instance needs --store (an instance of which cluster?)".to_owned());
            }
            None => {}
        }
        Ok((server, config, driver))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ScaleOut, String> {
        let mut out = ScaleOut::default();
        let mut it = args.iter().map(|s| (*s).to_owned());
        while let Some(a) = it.next() {
            if !out.take(&a, &mut it)? {
                return Err(format!("unknown {a}"));
            }
        }
        Ok(out)
    }

    #[test]
    fn flags_take_their_values() {
        let s = parse(&["--store", "redis://127.0.0.1:1", "--instance", "a"]).unwrap();
        assert_eq!(s.store(), Some("redis://127.0.0.1:1"));
        assert_eq!(s.describe(), "instance a, store redis://127.0.0.1:1");
        assert!(parse(&["--store"]).unwrap_err().contains("needs a value"));
        assert_eq!(ScaleOut::default().describe(), "state in memory");
    }

    #[test]
    fn a_short_or_missing_key_file_is_refused() {
        let dir = std::env::temp_dir().join(format!("mcp-demo-key-{}", std::process::id()));
        std::fs::write(&dir, b"too short\n").unwrap();
        let s = parse(&["--state-key-file", dir.to_str().unwrap()]).unwrap();
        assert!(s.state_keys().unwrap_err().contains("32"));
        std::fs::write(&dir, format!("{}\n", "k".repeat(32))).unwrap();
        assert!(s.state_keys().unwrap().is_some());
        std::fs::remove_file(&dir).unwrap();
        let gone = parse(&["--state-key-file", "/nonexistent/key"]).unwrap();
        assert!(gone.state_keys().unwrap_err().contains("cannot read"));
    }

    #[test]
    fn an_instance_needs_a_store_and_a_valid_name() {
        let never = |_: &str| -> Result<Arc<dyn ClusterBackend>, String> { Err("x".into()) };
        let s = parse(&["--instance", "a"]).unwrap();
        let err = s
            .apply(
                Server::new("t", "1"),
                ServerConfig::default(),
                DriverConfig::default(),
                never,
            )
            .unwrap_err();
        assert!(err.contains("needs --store"), "{err}");
        let s = parse(&["--store", "redis://h:1", "--instance", "a-b"]).unwrap();
        let err = s
            .apply(
                Server::new("t", "1"),
                ServerConfig::default(),
                DriverConfig::default(),
                never,
            )
            .unwrap_err();
        assert!(err.contains("bad --instance"), "{err}");
        let s = parse(&["--store", "redis://h:1"]).unwrap();
        let err = s
            .apply(
                Server::new("t", "1"),
                ServerConfig::default(),
                DriverConfig::default(),
                never,
            )
            .unwrap_err();
        assert!(err.contains("bad --store"), "{err}");
    }
}
