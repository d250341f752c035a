//! A fleet's Redis on a Unix socket (docs/redis.md): the way to the socket is checked as the way
//! to a record file is, a server's own system account allowed, so that no other local user can
//! put a server of theirs where the password is sent.

use crate::common;

use std::os::unix::fs::{PermissionsExt, lchown};
use std::path::Path;
use std::process::{Command, Output};

use common::redis_server::Server;
use common::stderr_of;

const PASSWORD: &str = "Vt5nQe8-socket-Pw33kD";

/// `retry --quota URL -n 1 -- true`, with the password in the environment.
fn run(dir: &Path, url: &str) -> Output {
    common::retry()
        .current_dir(dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_RUNTIME_DIR", dir)
        .env("RETRY_REDIS_PASSWORD", PASSWORD)
        .env_remove("RETRY_REDIS_USER")
        .args(["--quota", url, "-n", "1", "--", "true"])
        .timeout(common::STEP_LIMIT)
        .output()
        .unwrap()
}

/// How many connections the server at `socket` has taken.
fn connections(socket: &Path) -> u64 {
    let out = Command::new("redis-cli")
        .arg("-s")
        .arg(socket)
        .env("REDISCLI_AUTH", PASSWORD)
        .args(["--no-auth-warning", "INFO", "stats"])
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no connection count: {out:?}"))
}

/// The one warning of a run whose quota's socket was refused, and that the server was never
/// connected to.
fn refused(dir: &Path, url: &str, socket: &Path, why: &str) {
    let before = connections(socket);
    let out = run(dir, url);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = stderr_of(&out);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains("refusing the socket") && warnings[0].contains(why),
        "{err}"
    );
    // redis-cli's own INFO is the one connection more.
    assert_eq!(connections(socket), before + 1, "{url} was connected to");
}

#[test]
fn a_socket_another_local_user_could_have_put_there_is_never_sent_the_password() {
    let Some(other) = common::other_user() else {
        return;
    };
    let Some(server) = Server::start_unix("socket-way", &["--requirepass", PASSWORD]) else {
        return;
    };
    let socket = server.socket.clone().expect("a socket");
    let home = socket.parent().unwrap();
    let dir = common::runtime_dir("socket-way-run");

    // The way goes through a directory another local user owns.
    let foreign = common::temp_dir("socket-way-foreign");
    std::os::unix::fs::symlink(home, foreign.join("d")).unwrap();
    std::os::unix::fs::chown(&foreign, Some(other), None).unwrap();
    let through = foreign.join("d/redis.sock");
    let url = |s: &Path| format!("redis+unix://{}/jobs", s.display());
    refused(
        &dir,
        &url(&through),
        &socket,
        &format!("owned by uid {other}"),
    );

    // A link to the socket, at its last component.
    let links = common::temp_dir("socket-way-link");
    std::os::unix::fs::symlink(&socket, links.join("s.sock")).unwrap();
    refused(
        &dir,
        &url(&links.join("s.sock")),
        &socket,
        "a symbolic link",
    );

    // The socket itself another local user's.
    lchown(&socket, Some(other), None).unwrap();
    refused(&dir, &url(&socket), &socket, "another local user");

    // A system account's socket (a server's own, as Debian's `redis`) is used, as is this
    // user's: the quota is kept on the server.
    for owner in [1, 0] {
        lchown(&socket, Some(owner), None).unwrap();
        let before = connections(&socket);
        let out = run(&dir, &url(&socket));
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(!stderr_of(&out).contains("warning"), "{out:?}");
        assert!(
            connections(&socket) > before + 1,
            "uid {owner}: not connected to"
        );
    }
    std::fs::set_permissions(&foreign, std::fs::Permissions::from_mode(0o755)).unwrap();
}
