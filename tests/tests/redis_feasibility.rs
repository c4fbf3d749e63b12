//! Feasibility study (issue 15): the `redis` crate (1.8, features `tokio-comp` and
//! `smol-comp` both on, as in a workspace build where each adapter brings its own) used from
//! tokio AND smol in ONE process, against a real `redis-server`.
//!
//! Each test pins one finding; together they show what a runtime-neutral Redis executor in
//! `mcp_driver` can rely on:
//!
//! 1. The crate's own connect (`Client::get_multiplexed_async_connection`) picks a runtime per
//!    call (tokio if the calling thread is inside a tokio runtime, else smol's global
//!    executor) and spawns the connection's task there; a connection made on tokio dies with
//!    that runtime, wherever it is used from.
//! 2. `MultiplexedConnection::new_with_config(&info, stream, config)` takes a stream we dialed
//!    (it must implement *tokio's* `AsyncRead + AsyncWrite`: a smol `TcpStream` goes through
//!    `tokio_util::compat`) and returns the connection's background future, which we run on
//!    any executor we like; it ends when the last clone is dropped.
//! 3. With `response_timeout` and `connection_timeout` set to `None`, nothing of the crate
//!    asks which runtime it is on: even under a global `prefer_tokio()`, such a connection
//!    works on a smol thread, while a `response_timeout` (and the crate's own connect) then
//!    panics there ("must be called from the context of a Tokio 1.x runtime"); under
//!    `prefer_smol()` everything works on tokio threads too (async-io needs no executor),
//!    with the connections' tasks on smol's global executor. Shown in child processes: the
//!    preference is process-wide and set once.
//! 4. RESP3 pushes (`set_push_sender` + `subscribe`) work on such a connection, next to
//!    ordinary commands, and a lost connection is announced by a `Disconnection` push.
//! 5. Lua scripts (`Script`, reloaded by itself after `SCRIPT FLUSH`), MULTI/EXEC pipelines
//!    and Streams (`XADD` in a script, `XRANGE` with an exclusive start) work.
//! 6. A blocking command (`XREAD BLOCK`) holds up every other command of its multiplexed
//!    connection: blocking reads need a connection of their own.
//! 7. Timeouts: the crate's `response_timeout`, or simply dropping a request future under a
//!    timer of our own, fails that request without breaking the connection (the late reply
//!    is discarded, the next reply goes to the next request); a request queued behind a slow
//!    one times out too (one connection, one reply order); a killed server fails requests
//!    promptly instead of hanging them, and the connection stays dead: re-dialing is ours.
//!
//! The calls that worked (redis 1.8.1):
//!
//! ```text
//! MultiplexedConnection::new_with_config<C>(&RedisConnectionInfo, C, AsyncConnectionConfig)
//!     -> RedisResult<(MultiplexedConnection, impl Future<Output = ()> + 'static)>
//!     where C: Unpin + tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static
//!   (the future captures the `&RedisConnectionInfo` borrow in its type: box or spawn it
//!    where `info` lives, as `Pin<Box<dyn Future<Output = ()> + Send>>`)
//! RedisConnectionInfo::default().set_protocol(ProtocolVersion::RESP3)
//! AsyncConnectionConfig::new().set_connection_timeout(None).set_response_timeout(None)
//!     .set_push_sender(move |p: PushInfo| tx.unbounded_send(p))   // any Fn(PushInfo) -> Result
//! tokio_util::compat::FuturesAsyncReadCompatExt::compat(smol::net::TcpStream)
//! MultiplexedConnection::subscribe / psubscribe(&mut self, impl ToRedisArgs) -> RedisResult<()>
//! Script::new(lua).key(k).arg(a).invoke_async::<T>(&mut con)      // EVALSHA, NOSCRIPT -> load
//! AsyncTypedCommands: xadd, xrange(key, "(ID", "+"), xrange_all, publish, set, get, incr, hget
//! redis::pipe().atomic() ... .query_async::<T>(&mut con)           // MULTI/EXEC
//! RedisError::is_timeout / is_connection_dropped / is_io_error
//! redis::aio::prefer_tokio() / prefer_smol() -> RedisResult<()>   // process-wide, once
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::{Duration, Instant};

use mcp_tests::require_service;
use mcp_tests::services::Redis;
use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, AsyncTypedCommands, ProtocolVersion, PushInfo, PushKind,
    RedisConnectionInfo, Value,
};
use smol::stream::StreamExt;
use tokio_util::compat::FuturesAsyncReadCompatExt;

/// The bound of every wait of these tests.
const WAIT: Duration = Duration::from_secs(5);

/// `fut`, or a panic naming `what` after [`WAIT`]. On smol's timer (async-io), which works
/// under any executor.
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    let timer = async {
        smol::Timer::after(WAIT).await;
        None
    };
    smol::future::or(async { Some(fut.await) }, timer)
        .await
        .unwrap_or_else(|| panic!("{what}: nothing within {WAIT:?}"))
}

fn info(protocol: ProtocolVersion) -> RedisConnectionInfo {
    RedisConnectionInfo::default().set_protocol(protocol)
}

/// A configuration under which the crate never consults its runtime selection: no
/// connection timeout (we dial), no response timeout (we time requests out ourselves).
fn runtime_free() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(None)
        .set_response_timeout(None)
}

/// The connection's background future, boxed: what `mcp_driver::Runtime::spawn` takes.
type Driver = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A connection over a smol (async-io) `TcpStream` we dial, and its background future.
async fn dial_smol(
    addr: SocketAddr,
    protocol: ProtocolVersion,
    config: AsyncConnectionConfig,
) -> (MultiplexedConnection, Driver) {
    let tcp = smol::net::TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let info = info(protocol);
    // redis' codec reads and writes through tokio's traits: futures-io -> tokio-io.
    let (con, driver) = MultiplexedConnection::new_with_config(&info, tcp.compat(), config)
        .await
        .unwrap();
    // The future's type captures the borrow of `info` (an edition-2024 `impl Future` in
    // redis' signature), so the pair cannot be returned as it is; its `'static` bound lets
    // it be boxed (or spawned) here.
    (con, Box::pin(driver))
}

/// The same over a tokio `TcpStream` (must be called inside a tokio runtime).
async fn dial_tokio(
    addr: SocketAddr,
    protocol: ProtocolVersion,
    config: AsyncConnectionConfig,
) -> (MultiplexedConnection, Driver) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let info = info(protocol);
    let (con, driver) = MultiplexedConnection::new_with_config(&info, tcp, config)
        .await
        .unwrap();
    (con, Box::pin(driver))
}

fn text(v: &Value) -> String {
    redis::from_redis_value_ref::<String>(v).unwrap()
}

#[test]
fn the_crates_own_connect_picks_the_calling_threads_runtime_and_dies_with_it() {
    let redis = require_service!(Redis::start());
    let client = redis::Client::open(redis.url()).unwrap();

    // On a thread inside a tokio runtime: the connection's task goes to tokio.
    let (to_main, from_tokio) = std::sync::mpsc::channel();
    let (stop_tokio, stop) = std::sync::mpsc::channel::<()>();
    let c = client.clone();
    let tokio_thread = std::thread::spawn(move || {
        let rt = mcp_tests::runtime::one_worker_tokio();
        let con = rt.block_on(async move {
            let mut con = c.get_multiplexed_async_connection().await.unwrap();
            con.set("from", "tokio").await.unwrap();
            con
        });
        to_main.send(con).unwrap();
        stop.recv_timeout(WAIT).unwrap();
        rt.shutdown_timeout(Duration::from_secs(1));
    });
    let mut on_tokio = from_tokio.recv_timeout(WAIT).unwrap();

    smol::block_on(async {
        // This thread has no tokio runtime: the same call spawns on smol's global executor.
        let mut on_smol = within("connect on smol", client.get_multiplexed_async_connection())
            .await
            .unwrap();
        assert_eq!(on_smol.get("from").await.unwrap().as_deref(), Some("tokio"));
        on_smol.set("from", "smol").await.unwrap();
        // The tokio-made connection serves this smol thread while its runtime lives ...
        assert_eq!(
            within("tokio connection from smol", on_tokio.get("from"))
                .await
                .unwrap()
                .as_deref(),
            Some("smol")
        );
        // ... and fails (promptly, not hanging) once that runtime is gone.
        stop_tokio.send(()).unwrap();
        tokio_thread.join().unwrap();
        let err = within("dead tokio connection", on_tokio.get("from"))
            .await
            .unwrap_err();
        assert!(err.is_connection_dropped() || err.is_io_error(), "{err:?}");
        // The smol one is unaffected.
        assert_eq!(on_smol.get("from").await.unwrap().as_deref(), Some("smol"));
    });
}

#[test]
fn a_connection_over_our_own_stream_runs_on_our_own_executor_and_stops_with_its_last_clone() {
    let redis = require_service!(Redis::start());
    let addr = redis.addr();

    // smol: our stream, our (private) executor.
    let ex = smol::Executor::new();
    smol::block_on(ex.run(async {
        let (mut con, driver) = dial_smol(addr, ProtocolVersion::RESP2, runtime_free()).await;
        let task = ex.spawn(driver);
        con.set("k", "smol").await.unwrap();
        let mut clone = con.clone();
        let (a, b) = smol::future::zip(con.get("k"), clone.incr("n", 1)).await;
        assert_eq!((a.unwrap().as_deref(), b.unwrap()), (Some("smol"), 1));
        drop((con, clone));
        within("the driver ends with the last clone", task).await;
    }));

    // tokio: the same with a tokio stream and tokio::spawn.
    mcp_tests::runtime::one_worker_tokio().block_on(async {
        let (mut con, driver) = dial_tokio(addr, ProtocolVersion::RESP2, runtime_free()).await;
        let task = tokio::spawn(driver);
        assert_eq!(con.get("k").await.unwrap().as_deref(), Some("smol"));
        drop(con);
        within("the driver ends with the last clone", task)
            .await
            .unwrap();
    });

    // Across runtimes: an async-io stream needs no particular executor, so its background
    // future may run on tokio while smol code uses the connection.
    let rt = mcp_tests::runtime::one_worker_tokio();
    let (mut con, driver) = smol::block_on(dial_smol(addr, ProtocolVersion::RESP2, runtime_free()));
    let task = rt.spawn(driver);
    smol::block_on(async {
        assert_eq!(
            within("smol stream, tokio driver", con.incr("n", 1))
                .await
                .unwrap(),
            2
        );
    });
    drop(con);
    rt.block_on(async { within("driver", task).await.unwrap() });
}

#[test]
fn a_store_url_parses_into_the_address_to_dial_and_the_settings_of_the_handshake() {
    // `--store redis://HOST:PORT/DB?protocol=resp3`: the crate parses it, we dial its
    // address ourselves and hand its settings (db, credentials, protocol) to the handshake.
    let redis = require_service!(Redis::start());
    let url = format!("{}/3?protocol=resp3", redis.url());
    let parsed = redis::IntoConnectionInfo::into_connection_info(url.as_str()).unwrap();
    let redis::ConnectionAddr::Tcp(host, port) = parsed.addr() else {
        panic!("{:?}", parsed.addr());
    };
    assert_eq!((host.as_str(), *port), ("127.0.0.1", redis.addr().port()));
    let settings = parsed.redis_settings().clone();
    assert_eq!(settings.db(), 3);
    assert_eq!(settings.protocol(), ProtocolVersion::RESP3);
    smol::block_on(async {
        let tcp = smol::net::TcpStream::connect((host.as_str(), *port))
            .await
            .unwrap();
        let (mut con, driver) =
            MultiplexedConnection::new_with_config(&settings, tcp.compat(), runtime_free())
                .await
                .unwrap();
        smol::spawn(driver).detach();
        let client_info: String = redis::cmd("CLIENT")
            .arg("INFO")
            .query_async(&mut con)
            .await
            .unwrap();
        let fields: Vec<&str> = client_info.split_whitespace().collect();
        assert!(
            fields.contains(&"db=3") && fields.contains(&"resp=3"),
            "{client_info}"
        );
    });
}

#[test]
fn resp3_pushes_deliver_pub_sub_on_a_multiplexed_connection_and_announce_its_loss() {
    let mut redis = require_service!(Redis::start());
    let addr = redis.addr();
    let (tx, mut pushes) = futures_channel::mpsc::unbounded::<PushInfo>();
    let ex = smol::Executor::new();
    smol::block_on(ex.run(async {
        let config = runtime_free().set_push_sender(move |p: PushInfo| tx.unbounded_send(p));
        let (mut sub, driver) = dial_smol(addr, ProtocolVersion::RESP3, config).await;
        ex.spawn(driver).detach();
        sub.subscribe(&["bus:a", "bus:b"]).await.unwrap();
        sub.psubscribe("bus:p:*").await.unwrap();
        // The confirmations come as pushes too.
        let mut kinds = Vec::new();
        for _ in 0..3 {
            kinds.push(within("confirmation", pushes.next()).await.unwrap().kind);
        }
        assert_eq!(
            kinds,
            [
                PushKind::Subscribe,
                PushKind::Subscribe,
                PushKind::PSubscribe
            ]
        );

        // Publish from another connection (RESP2, on the same executor).
        let (mut publisher, driver) = dial_smol(addr, ProtocolVersion::RESP2, runtime_free()).await;
        ex.spawn(driver).detach();
        assert_eq!(publisher.publish("bus:b", "hello").await.unwrap(), 1);
        assert_eq!(publisher.publish("bus:p:x", "pattern").await.unwrap(), 1);
        let msg = within("message", pushes.next()).await.unwrap();
        assert_eq!(msg.kind, PushKind::Message);
        assert_eq!(
            msg.data.iter().map(text).collect::<Vec<_>>(),
            ["bus:b", "hello"]
        );
        let msg = within("pmessage", pushes.next()).await.unwrap();
        assert_eq!(msg.kind, PushKind::PMessage);
        assert_eq!(
            msg.data.iter().map(text).collect::<Vec<_>>(),
            ["bus:p:*", "bus:p:x", "pattern"]
        );
        // The subscribed connection still runs ordinary commands (RESP3).
        sub.set("still", "usable").await.unwrap();
        assert_eq!(sub.get("still").await.unwrap().as_deref(), Some("usable"));

        // The server goes: the push channel says so (the cue to re-dial and re-subscribe).
        redis.kill();
        let lost = within("disconnection push", pushes.next()).await.unwrap();
        assert_eq!(lost.kind, PushKind::Disconnection);
        assert!(sub.get("still").await.is_err());
    }));
}

#[test]
fn lua_scripts_transactions_and_streams_work() {
    let redis = require_service!(Redis::start());
    let addr = redis.addr();
    let ex = smol::Executor::new();
    smol::block_on(ex.run(async {
        let (mut con, driver) = dial_smol(addr, ProtocolVersion::RESP3, runtime_free()).await;
        ex.spawn(driver).detach();

        // An event appended and its stream's TTL refreshed in one atomic step; the id
        // (globally ordered for that stream) returned.
        let append = redis::Script::new(
            r"local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'event', ARGV[1])
              redis.call('PEXPIRE', KEYS[1], ARGV[3])
              return id",
        );
        let mut ids = Vec::new();
        for event in ["one", "two", "three"] {
            let id: String = append
                .key("events:s1")
                .arg(event)
                .arg(1000)
                .arg(60_000)
                .invoke_async(&mut con)
                .await
                .unwrap();
            ids.push(id);
        }
        assert!(ids.windows(2).all(|w| w[0] != w[1]), "{ids:?}");
        // A Redis that lost its script cache (a restart, a fail-over): EVALSHA answers
        // NOSCRIPT, and `invoke_async` loads the script and runs it again by itself.
        redis::cmd("SCRIPT")
            .arg("FLUSH")
            .exec_async(&mut con)
            .await
            .unwrap();
        let id: String = append
            .key("events:s1")
            .arg("four")
            .arg(1000)
            .arg(60_000)
            .invoke_async(&mut con)
            .await
            .unwrap();
        ids.push(id);

        let all = con.xrange_all("events:s1").await.unwrap();
        let got: Vec<(String, String)> = all
            .ids
            .iter()
            .map(|e| (e.id.clone(), text(&e.map["event"])))
            .collect();
        let want: Vec<(String, String)> = ids
            .iter()
            .cloned()
            .zip(["one", "two", "three", "four"].map(String::from))
            .collect();
        assert_eq!(got, want);
        // Replay after an id (a `Last-Event-ID`): XRANGE with an exclusive start.
        let after = con
            .xrange("events:s1", format!("({}", ids[1]), "+")
            .await
            .unwrap();
        assert_eq!(
            after.ids.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
            ids[2..]
        );
        let ttl: i64 = redis::cmd("PTTL")
            .arg("events:s1")
            .query_async(&mut con)
            .await
            .unwrap();
        assert!(ttl > 0 && ttl <= 60_000, "{ttl}");

        // MULTI/EXEC: a session record and its counter in one step.
        let (count,): (i64,) = redis::pipe()
            .atomic()
            .hset("session:x", "version", "2025-11-25")
            .ignore()
            .pexpire("session:x", 60_000)
            .ignore()
            .incr("sessions", 1)
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(count, 1);
        assert_eq!(
            con.hget("session:x", "version").await.unwrap().as_deref(),
            Some("2025-11-25")
        );
    }));
}

#[test]
fn a_blocking_read_holds_up_every_other_command_of_its_connection() {
    let redis = require_service!(Redis::start());
    let addr = redis.addr();
    let ex = smol::Executor::new();
    smol::block_on(ex.run(async {
        let (con, driver) = dial_smol(addr, ProtocolVersion::RESP3, runtime_free()).await;
        ex.spawn(driver).detach();
        let (mut reader, mut other) = (con.clone(), con);
        let block = async {
            redis::cmd("XREAD")
                .arg(&["BLOCK", "300", "STREAMS", "nothing", "$"])
                .query_async::<Value>(&mut reader)
                .await
                .unwrap()
        };
        let ping = async {
            let started = Instant::now();
            redis::cmd("PING")
                .query_async::<String>(&mut other)
                .await
                .unwrap();
            started.elapsed()
        };
        let (read, ping_took) = within("xread and ping", smol::future::zip(block, ping)).await;
        assert_eq!(read, Value::Nil);
        assert!(
            ping_took >= Duration::from_millis(250),
            "PING answered in {ping_took:?} behind XREAD BLOCK 300"
        );
    }));
}

#[test]
fn timed_out_requests_leave_the_connection_usable_and_a_dead_server_fails_them_promptly() {
    let mut redis = require_service!(Redis::start());
    let addr = redis.addr();
    // Blocks the server's handling of this connection for 400 ms.
    let blpop = || redis::cmd("BLPOP").arg("nothing").arg("0.4").clone();

    // The crate's response timeout, on a smol thread (both runtimes compiled in, no
    // preference set: it takes smol's timer here), then on a tokio thread (tokio's timer).
    let timeouts = |mut con: MultiplexedConnection| async move {
        con.set("k", "v").await.unwrap();
        con.set("k2", "w").await.unwrap();
        let started = Instant::now();
        let err = blpop().query_async::<Value>(&mut con).await.unwrap_err();
        assert!(err.is_timeout(), "{err:?}");
        assert!(started.elapsed() < Duration::from_millis(350));
        // A request queued behind the slow one times out as well (one connection, one
        // reply order: head-of-line blocking) ...
        let err = con.get("k").await.unwrap_err();
        assert!(err.is_timeout(), "{err:?}");
        // ... and once the server is through, the late replies (BLPOP's nil, then "v") are
        // discarded: the next request gets its own.
        smol::Timer::after(Duration::from_millis(500)).await;
        assert_eq!(con.get("k2").await.unwrap().as_deref(), Some("w"));
    };
    let with_timeout = || runtime_free().set_response_timeout(Some(Duration::from_millis(100)));
    smol::block_on(async {
        let (con, driver) = dial_smol(addr, ProtocolVersion::RESP3, with_timeout()).await;
        smol::spawn(driver).detach();
        timeouts(con).await;
    });
    mcp_tests::runtime::one_worker_tokio().block_on(async {
        let (con, driver) = dial_tokio(addr, ProtocolVersion::RESP3, with_timeout()).await;
        tokio::spawn(driver);
        timeouts(con).await;
    });

    // Our own timeout: drop the request future when a timer of ours fires (what a driver
    // does with `Runtime::sleep_until`). Same outcome, no runtime selection involved.
    smol::block_on(async {
        let (mut con, driver) = dial_smol(addr, ProtocolVersion::RESP3, runtime_free()).await;
        smol::spawn(driver).detach();
        let mut clone = con.clone();
        let timed_out = smol::future::or(
            async {
                blpop().query_async::<Value>(&mut clone).await.unwrap();
                false
            },
            async {
                smol::Timer::after(Duration::from_millis(100)).await;
                true
            },
        )
        .await;
        assert!(timed_out);
        // A slow server (DEBUG SLEEP, enabled by the test helper) and our timer again.
        let slow = smol::future::or(
            async {
                redis::cmd("DEBUG")
                    .arg(&["SLEEP", "0.3"])
                    .exec_async(&mut clone)
                    .await
                    .unwrap();
                false
            },
            async {
                smol::Timer::after(Duration::from_millis(50)).await;
                true
            },
        )
        .await;
        assert!(slow);
        assert_eq!(
            within("after two dropped requests", con.get("k2"))
                .await
                .unwrap()
                .as_deref(),
            Some("w")
        );

        // The server is killed: requests fail at once, they do not hang.
        redis.kill();
        let started = Instant::now();
        let err = within("a dead server", con.get("k")).await.unwrap_err();
        assert!(err.is_connection_dropped() || err.is_io_error(), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(1));
        // It comes back: the old connection stays dead, a new dial works.
        redis.restart().unwrap();
        assert!(con.get("k").await.is_err());
        let (mut again, driver) = dial_smol(addr, ProtocolVersion::RESP3, runtime_free()).await;
        smol::spawn(driver).detach();
        assert_eq!(again.get("k").await.unwrap(), None);
    });
}

/// The environment variable that makes the `child_under_prefer_*` tests run (the Redis
/// address).
const CHILD_ENV: &str = "MCP_TESTS_REDIS_FEASIBILITY_CHILD";

/// Runs the ignored test `child` in a child process (this test binary again): a runtime
/// preference is process-wide and cannot be undone. Returns its stdout and stderr.
fn run_child(child: &str, redis: &Redis) -> (String, String) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child, "--ignored", "--nocapture"])
        .env(CHILD_ENV, redis.addr().to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "{stdout}\n{stderr}");
    (stdout, stderr)
}

/// The Redis address its parent passed, or `None` when a child test is run by hand.
fn child_addr() -> Option<SocketAddr> {
    let addr = std::env::var(CHILD_ENV).ok().and_then(|a| a.parse().ok());
    if addr.is_none() {
        eprintln!("skipped: only run as the child process of its parent test");
    }
    addr
}

/// Runs `body` on a fresh smol `block_on`, and says whether it panicked.
fn panics(body: impl Future<Output = ()>) -> &'static str {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| smol::block_on(body))) {
        Ok(()) => "ok",
        Err(_) => "panicked",
    }
}

#[test]
fn under_a_global_prefer_tokio_only_the_runtime_free_connection_survives_a_smol_thread() {
    let redis = require_service!(Redis::start());
    let (stdout, stderr) = run_child("child_under_prefer_tokio", &redis);
    for line in [
        "runtime-free connection on smol: ok",
        "response_timeout on smol: panicked",
        "Client connect on smol: panicked",
    ] {
        assert!(
            stdout.contains(line),
            "missing {line:?} in\n{stdout}\n{stderr}"
        );
    }
    assert!(
        stderr.contains("must be called from the context of a Tokio 1.x runtime"),
        "{stderr}"
    );
}

#[test]
#[ignore = "the child process of under_a_global_prefer_tokio_..."]
fn child_under_prefer_tokio() {
    let Some(addr) = child_addr() else { return };
    redis::aio::prefer_tokio().unwrap();
    // No tokio runtime anywhere in this process: only smol.
    let free = panics(async {
        let (mut con, driver) = dial_smol(addr, ProtocolVersion::RESP3, runtime_free()).await;
        smol::spawn(driver).detach();
        con.set("pref", "tokio").await.unwrap();
        assert_eq!(con.get("pref").await.unwrap().as_deref(), Some("tokio"));
    });
    println!("runtime-free connection on smol: {free}");
    let timed = panics(async {
        let config = runtime_free().set_response_timeout(Some(Duration::from_secs(1)));
        let (mut con, driver) = dial_smol(addr, ProtocolVersion::RESP3, config).await;
        smol::spawn(driver).detach();
        let _ = con.get("pref").await;
    });
    println!("response_timeout on smol: {timed}");
    let client = redis::Client::open(format!("redis://{addr}")).unwrap();
    let connect = panics(async {
        let _ = client.get_multiplexed_async_connection().await;
    });
    println!("Client connect on smol: {connect}");
}

#[test]
fn under_a_global_prefer_smol_everything_works_on_tokio_threads_too() {
    let redis = require_service!(Redis::start());
    let (stdout, stderr) = run_child("child_under_prefer_smol", &redis);
    assert!(
        stdout.contains("Client connect and response_timeout on tokio: ok"),
        "{stdout}\n{stderr}"
    );
}

#[test]
#[ignore = "the child process of under_a_global_prefer_smol_..."]
fn child_under_prefer_smol() {
    let Some(addr) = child_addr() else { return };
    redis::aio::prefer_smol().unwrap();
    // smol's timer and TcpStream (async-io) need no executor of theirs: the crate's own
    // connect works from a tokio thread, its task on smol's global executor.
    mcp_tests::runtime::one_worker_tokio().block_on(async {
        let client = redis::Client::open(format!("redis://{addr}")).unwrap();
        let config = AsyncConnectionConfig::new().set_response_timeout(Some(WAIT));
        let mut con = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap();
        con.set("pref", "smol").await.unwrap();
        assert_eq!(con.get("pref").await.unwrap().as_deref(), Some("smol"));
    });
    println!("Client connect and response_timeout on tokio: ok");
}
