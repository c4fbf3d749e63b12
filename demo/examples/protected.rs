//! The users server (plus `whoami`) behind OAuth 2.1 JWT access tokens, checked against a
//! JWKS in the server's asynchronous authentication step (`mcp_demo::protected`).
//!
//! ```text
//! cargo run --release -p mcp-demo --features protected --example protected -- [--bind ADDR:PORT]
//!     [--resource URL] [--scope SCOPE] [--issuer URL --jwks FILE]
//!     [--dpop | --dpop-only] [--dpop-nonce SECS]
//! ```
//!
//! Without `--jwks` it runs its own demo issuer: a P-256 key made at startup, whose public
//! half is the JWKS the server checks tokens against (held in memory, parsed like any JWKS
//! document), and prints two ES256 access tokens for the resource, as shell assignments:
//! `ALICE=…`, with the scope, and `BOB=…`, without it (a 403). Try them with the example
//! client's `--token`. The demo
//! issuer is a name only (`<origin>/demo-issuer`): it serves no authorization endpoints, so
//! the client's `--oauth` needs a real authorization server.
//!
//! With `--issuer URL --jwks FILE` it checks the tokens of that authorization server: the
//! file is its JWK set (what its `jwks_uri` serves), read at startup and again when a token
//! names a key it does not hold (key rotation, at most every 30 s). The protected resource
//! metadata names that issuer, so `client --oauth` finds it.
//!
//! Tokens must be for `--resource` (default `http://<bind>/mcp`, the `aud` claim), from the
//! issuer (`iss`), unexpired, and grant `--scope` (default `mcp`).
//!
//! `--dpop` accepts DPoP-bound tokens (RFC 9449: a `cnf.jkt` claim): such a token only
//! as `Authorization: DPoP` with a proof of its key for each request (checked by
//! `mcp_driver::DpopVerifier`); `--dpop-only` refuses unbound tokens too; `--dpop-nonce
//! SECS` makes proofs carry the server's nonce, rotated every SECS seconds. An authorization
//! server that issues bound tokens (`--issuer`) and a client with `OAuthConfig::with_dpop`
//! go with it; the demo issuer's tokens are unbound. Logs go to stderr
//! (`RUST_LOG`, default `info`); Ctrl-C shuts down.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use mcp_demo::protected::{self, DemoIssuer, JwtValidator, KeySource, TokenPolicy};
use mcp_proto::server::ServerConfig;
use mcp_tokio::DriverConfig;

const USAGE: &str = "usage: protected [--bind ADDR:PORT] [--resource URL] [--scope SCOPE] \
                     [--issuer URL --jwks FILE] [--dpop | --dpop-only] [--dpop-nonce SECS]   \
                     (default 127.0.0.1:8080, a demo issuer, bearer tokens)";

/// How long the demo tokens last.
const DEMO_TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

struct Args {
    bind: SocketAddr,
    resource: Option<String>,
    scope: String,
    issuer: Option<String>,
    jwks: Option<PathBuf>,
    /// DPoP: off, accepted, or required.
    dpop: Option<bool>,
    /// DPoP nonces rotated this often.
    dpop_nonce: Option<Duration>,
}

fn parse() -> Result<Args, String> {
    let mut bind = "127.0.0.1:8080".to_owned();
    let mut args = Args {
        bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
        resource: None,
        scope: protected::DEFAULT_SCOPE.to_owned(),
        issuer: None,
        jwks: None,
        dpop: None,
        dpop_nonce: None,
    };
    let mut argv = std::env::args().skip(1);
    while let Some(arg) = argv.next() {
        let mut value = || argv.next().ok_or(format!("{arg} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--bind" => bind = value()?,
            "--resource" => args.resource = Some(value()?),
            "--scope" => args.scope = value()?,
            "--issuer" => args.issuer = Some(value()?),
            "--jwks" => args.jwks = Some(PathBuf::from(value()?)),
            "--dpop" => args.dpop = Some(args.dpop.unwrap_or(false)),
            "--dpop-only" => args.dpop = Some(true),
            "--dpop-nonce" => {
                let secs: u64 = value()?
                    .parse()
                    .map_err(|_| format!("--dpop-nonce takes seconds\n{USAGE}"))?;
                args.dpop_nonce = Some(Duration::from_secs(secs));
                args.dpop.get_or_insert(false);
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    args.bind = bind
        .parse()
        .map_err(|e| format!("bad --bind address {bind:?}: {e}"))?;
    if args.jwks.is_some() != args.issuer.is_some() {
        return Err(format!("--jwks and --issuer go together\n{USAGE}"));
    }
    Ok(args)
}

/// The key set of `--jwks`, read off the runtime's worker threads.
fn file_source(path: PathBuf) -> KeySource {
    KeySource::new(move || {
        let path = path.clone();
        async move {
            let read = tokio::task::spawn_blocking(move || std::fs::read_to_string(&path));
            match read.await {
                Ok(Ok(text)) => Ok(text),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(e.to_string()),
            }
        }
    })
}

/// The validator, and what to print about it (the demo tokens).
fn validator(args: &Args, resource: &str) -> Result<(JwtValidator, Vec<String>), String> {
    if let (Some(issuer), Some(jwks)) = (&args.issuer, &args.jwks) {
        let policy = TokenPolicy::new(issuer, resource).with_scope(&args.scope);
        let notes = vec![format!(
            "tokens from {issuer} (keys: {}), for {resource}, scope {:?}",
            jwks.display(),
            args.scope
        )];
        return Ok((JwtValidator::new(policy, file_source(jwks.clone())), notes));
    }
    let origin = resource
        .find("://")
        .and_then(|i| resource[i + 3..].find('/').map(|j| &resource[..i + 3 + j]))
        .unwrap_or(resource);
    let demo = DemoIssuer::generate(format!("{origin}/demo-issuer"))?;
    let policy = TokenPolicy::new(demo.issuer(), resource).with_scope(&args.scope);
    let alice = demo.token("alice", resource, &args.scope, DEMO_TOKEN_LIFETIME)?;
    let bob = demo.token("bob", resource, "profile", DEMO_TOKEN_LIFETIME)?;
    let notes = vec![
        format!(
            "demo issuer {}: a P-256 key made now, its JWKS held in memory",
            demo.issuer()
        ),
        format!("alice's access token (scope {:?}, valid 1 h):", args.scope),
        format!("ALICE={alice}"),
        format!(
            "bob's access token (scope \"profile\", without {:?}: 403):",
            args.scope
        ),
        format!("BOB={bob}"),
    ];
    Ok((
        JwtValidator::new(policy, KeySource::fixed(demo.jwks())),
        notes,
    ))
}

#[tokio::main]
async fn main() -> ExitCode {
    mcp_demo::logging::init();
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(args.bind).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot bind {}: {e}", args.bind);
            return ExitCode::FAILURE;
        }
    };
    // The resource URL (the tokens' audience) names the port actually bound.
    let resource = match (&args.resource, listener.local_addr()) {
        (Some(r), _) => r.clone(),
        (None, Ok(addr)) => format!("http://{addr}/mcp"),
        (None, Err(e)) => {
            eprintln!("cannot read the bound address: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (validator, notes) = match validator(&args, &resource) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("cannot set up token validation: {e}");
            return ExitCode::FAILURE;
        }
    };
    let validator = match args.dpop {
        None => validator,
        Some(required) => {
            let mut policy = mcp_driver::DpopPolicy::default();
            if let Some(every) = args.dpop_nonce {
                policy = policy.with_nonces(every);
            }
            let verifier = Arc::new(mcp_driver::DpopVerifier::new(policy));
            println!(
                "DPoP-bound tokens accepted{}{}",
                if required { ", and only those" } else { "" },
                args.dpop_nonce
                    .map(|d| format!(", proofs with the server's nonce (rotated every {d:?})"))
                    .unwrap_or_default()
            );
            validator.with_dpop(verifier, required)
        }
    };
    // Read the keys now: a missing or unusable key set fails here, not on the first request.
    if let Err(e) = validator.load().await {
        eprintln!("cannot read the key set: {e}");
        return ExitCode::FAILURE;
    }
    let (config, driver) = protected::protect(
        ServerConfig::default(),
        DriverConfig::default(),
        Arc::new(validator),
    );
    let serving = match mcp_tokio::serve(listener, protected::server())
        .config(config)
        .driver(driver)
        .start()
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("protected users MCP server on {}", serving.url());
    for note in notes {
        println!("{note}");
    }
    if let Err(e) = tokio::signal::ctrl_c().await {
        eprintln!("cannot wait for Ctrl-C: {e}");
    }
    println!("shutting down");
    serving.shutdown().await;
    ExitCode::SUCCESS
}
