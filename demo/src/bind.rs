//! The `--bind HOST:PORT` option of the demo servers (the users examples of both adapters and
//! the tests' `mcp-everything`): an address, or a host name resolved to its first address.

use std::net::{SocketAddr, ToSocketAddrs};

/// The address `text` names: `127.0.0.1:8080`, `[::1]:8080`, or a host name and a port
/// (`localhost:8080`), resolved by the operating system (its first address).
///
/// # Errors
///
/// A text that is neither (no port, a port out of range, a name that does not resolve), as
/// a message naming the text and saying what is expected.
pub fn parse_bind(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let bad = |why: &dyn std::fmt::Display| {
        format!(
            "bad --bind address {text:?}: {why} (expected HOST:PORT, e.g. 127.0.0.1:8080 or localhost:8080)"
        )
    };
    let mut addrs = text.to_socket_addrs().map_err(|e| bad(&e))?;
    addrs
        .next()
        .ok_or_else(|| bad(&"the name resolves to no address"))
}

/// The address of a command line whose only option is `--bind` (default `127.0.0.1:8080`):
/// `args` without the program name; `usage` is the error for `-h`, `--help` and anything
/// unknown.
///
/// # Errors
///
/// As [`bind_and`].
pub fn bind_only(args: impl Iterator<Item = String>, usage: &str) -> Result<SocketAddr, String> {
    bind_and(args, usage, |_, _| Ok(false))
}

/// As [`bind_only`], with more options: `extra` is offered every other argument first, with
/// the rest of the line to take its value from, and says whether it took it.
///
/// # Errors
///
/// `-h`/`--help` (the usage), an unknown argument, what `extra` refuses, or an address
/// [`parse_bind`] refuses.
pub fn bind_and<I: Iterator<Item = String>>(
    mut args: I,
    usage: &str,
    mut extra: impl FnMut(&str, &mut I) -> Result<bool, String>,
) -> Result<SocketAddr, String> {
    let mut bind = "127.0.0.1:8080".to_owned();
    while let Some(arg) = args.next() {
        if extra(&arg, &mut args)? {
            continue;
        }
        match arg.as_str() {
            "--bind" => bind = args.next().ok_or("--bind needs an address")?,
            "-h" | "--help" => return Err(usage.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{usage}")),
        }
    }
    parse_bind(&bind)
}

#[cfg(test)]
mod tests {
    use super::{bind_only, parse_bind};

    #[test]
    fn a_bind_only_command_line() {
        let args = |a: &[&str]| {
            a.iter()
                .map(|s| (*s).to_owned())
                .collect::<Vec<_>>()
                .into_iter()
        };
        assert_eq!(
            bind_only(args(&[]), "u"),
            Ok("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(
            bind_only(args(&["--bind", "127.0.0.1:9"]), "u"),
            Ok("127.0.0.1:9".parse().unwrap())
        );
        assert_eq!(bind_only(args(&["--help"]), "u"), Err("u".to_owned()));
        assert!(bind_only(args(&["--bind"]), "u").is_err());
        assert!(
            bind_only(args(&["-x"]), "u")
                .unwrap_err()
                .starts_with("unknown argument")
        );
    }

    #[test]
    fn addresses_parse_as_they_are() {
        assert_eq!(
            parse_bind("127.0.0.1:8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(
            parse_bind("[::1]:9000").unwrap(),
            "[::1]:9000".parse().unwrap()
        );
        assert_eq!(parse_bind("0.0.0.0:0").unwrap().port(), 0);
    }

    #[test]
    fn a_host_name_resolves_to_its_first_address() {
        let addr = parse_bind("localhost:8080").unwrap();
        assert!(addr.ip().is_loopback(), "{addr}");
        assert_eq!(addr.port(), 8080);
    }

    #[test]
    fn what_names_no_address_is_a_clear_error() {
        for text in ["localhost", "127.0.0.1", "localhost:99999", ":8080", ""] {
            let e = parse_bind(text).unwrap_err();
            assert!(e.contains(&format!("{text:?}")), "{e}");
            assert!(e.contains("expected HOST:PORT"), "{e}");
        }
    }
}
