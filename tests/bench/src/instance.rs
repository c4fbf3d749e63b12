//! One of our server instances as a benchmark child process: which adapter, its store
//! (memory, or a cluster instance on Redis), and the services it shares core 0 with.
//! `bench-cluster` and `bench-scale` start theirs through here.

use std::process::ExitCode;

use mcp_proto::server::{ClusterConfig, ServerConfig};
use mcp_service::Server;

use crate::{echo, pin_to};

/// The prefix of the instances' Redis keys (`RedisConfig::default`).
pub const KEY_PREFIX: &str = "mcp";

/// Which of our adapters serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rt {
    /// `mcp_tokio::serve` on a current-thread runtime.
    Tokio,
    /// `mcp_smol::serve` (smol + async-h1).
    Smol,
}

impl Rt {
    /// Both, in the order tables show them.
    pub const ALL: [Rt; 2] = [Rt::Tokio, Rt::Smol];

    /// Its name on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Rt::Tokio => "tokio",
            Rt::Smol => "smol",
        }
    }

    /// The adapter named `name`.
    pub fn parse(name: &str) -> Option<Rt> {
        Rt::ALL.into_iter().find(|r| r.name() == name)
    }

    /// A comma-separated list of names.
    ///
    /// # Errors
    ///
    /// An unknown name, or none.
    pub fn parse_list(list: &str) -> Result<Vec<Rt>, String> {
        let all: Vec<Rt> = list
            .split(',')
            .map(|n| Rt::parse(n).ok_or(format!("unknown runtime {n:?}")))
            .collect::<Result<_, _>>()?;
        if all.is_empty() {
            return Err("no runtime named".into());
        }
        Ok(all)
    }
}

/// A `--serve` child's Redis store.
#[derive(Debug, Clone)]
pub struct RedisStore {
    /// The Redis URL.
    pub url: String,
    /// The cluster instance name.
    pub instance: String,
    /// `RedisConfig::max_in_flight` (its default when `None`; 1 runs the link's operations
    /// one after the other's answer).
    pub in_flight: Option<usize>,
}

/// The store a `--serve` child was given: `--redis URL` and `--instance NAME` together, or
/// neither (memory); `in_flight` only with them.
///
/// # Errors
///
/// When only one of them is given, or `in_flight` without them.
pub fn store_args(
    redis: Option<String>,
    instance: Option<String>,
    in_flight: Option<usize>,
) -> Result<Option<RedisStore>, String> {
    match (redis, instance) {
        (Some(url), Some(instance)) => Ok(Some(RedisStore {
            url,
            instance,
            in_flight,
        })),
        (None, None) if in_flight.is_none() => Ok(None),
        (None, None) => Err("--redis-in-flight needs --redis".into()),
        _ => Err("--redis and --instance go together".into()),
    }
}

/// `config` and the driver's configuration, as cluster instance `name` on the Redis at `url`
/// when `redis` is given.
///
/// # Errors
///
/// When the Redis backend or the instance name is refused.
pub fn with_store(
    rt: Rt,
    config: ServerConfig,
    redis: Option<&RedisStore>,
) -> std::io::Result<(ServerConfig, mcp_tokio::DriverConfig)> {
    let Some(RedisStore {
        url,
        instance: name,
        in_flight,
    }) = redis
    else {
        return Ok((config, Default::default()));
    };
    let mut settings = mcp_tokio::RedisConfig::default().with_prefix(KEY_PREFIX);
    if let Some(n) = in_flight {
        settings = settings.with_max_in_flight(*n);
    }
    let backend = match rt {
        Rt::Tokio => mcp_tokio::redis_backend(url, settings),
        Rt::Smol => mcp_smol::redis_backend(url, settings),
    }
    .map_err(std::io::Error::other)?;
    let cluster = ClusterConfig::new(name.as_str())
        .map_err(|e| std::io::Error::other(format!("instance name {name:?}: {e:?}")))?;
    let driver = mcp_tokio::DriverConfig::default().with_cluster_backend(backend);
    Ok((config.with_cluster(cluster), driver))
}

/// Serves `server` with `config` (on the store `redis` names) on `bind` with adapter `rt`,
/// pinned to `core`, until stdin closes; `label` names the benchmark in errors.
pub fn serve(
    rt: Rt,
    bind: &str,
    core: usize,
    server: Server,
    config: ServerConfig,
    redis: Option<&RedisStore>,
    label: &str,
) -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
        .with_writer(std::io::stderr)
        .try_init();
    if !pin_to(core) {
        eprintln!("{label} server: could not pin to core {core}");
    }
    let result = match rt {
        // smol's executor threads start after the pinning and inherit it.
        Rt::Smol => with_store(rt, config, redis)
            .and_then(|(config, driver)| echo::serve_smol_parked(bind, server, config, driver)),
        Rt::Tokio => match crate::current_thread() {
            Ok(runtime) => runtime.block_on(async {
                let listener = tokio::net::TcpListener::bind(bind).await?;
                let (config, driver) = with_store(rt, config, redis)?;
                echo::serve_tokio(listener, server, config, driver).await
            }),
            Err(e) => Err(std::io::Error::other(e)),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{label} server {}: {e}", rt.name());
            ExitCode::FAILURE
        }
    }
}

/// Runs `start` on a thread pinned to core 0, so that the process it spawns (redis-server,
/// nginx) runs there, beside the servers.
///
/// # Errors
///
/// When that thread panics.
pub fn on_core_0<T: Send + 'static>(
    start: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    std::thread::spawn(move || {
        if !pin_to(0) {
            eprintln!("could not pin a service to core 0");
        }
        start()
    })
    .join()
    .map_err(|_| "the thread starting a service panicked".to_owned())
}
