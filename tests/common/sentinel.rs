//! A Sentinel set of a test's own on 127.0.0.1: a master, a replica and three sentinels that
//! watch the master as `mymaster` (a quorum of two, the master deemed down after a second), so
//! that a test can kill the master and see the replica promoted. Every process is killed when
//! the set is dropped. Without `redis-server` the test says so loudly and passes, unless
//! RETRY_REQUIRE_REDIS=1 makes it fail.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::redis_server::{Server, cli, free_port};

pub const MASTER: &str = "mymaster";

/// One sentinel, killed when dropped.
pub struct Sentinel {
    child: Child,
    pub port: u16,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct SentinelSet {
    pub master: Server,
    pub replica: Option<Server>,
    pub sentinels: Vec<Sentinel>,
}

impl SentinelSet {
    /// A master, with a replica when `replica`, and three sentinels that know the master.
    pub fn start(test: &str, replica: bool) -> Option<SentinelSet> {
        let master = Server::start(&format!("{test}-master"), &[])?;
        let replica = match replica {
            true => {
                let of = master.port.to_string();
                let server = Server::start(
                    &format!("{test}-replica"),
                    &["--replicaof", "127.0.0.1", &of],
                )?;
                Some(server)
            }
            false => None,
        };
        let mut sentinels = Vec::new();
        for i in 0..3 {
            match start_sentinel(&format!("{test}-sentinel-{i}"), master.port) {
                Ok(s) => sentinels.push(s),
                Err(why) => return skip(test, &why),
            }
        }
        let set = SentinelSet {
            master,
            replica,
            sentinels,
        };
        // Each sentinel knows the master, and, with a replica, has found it.
        let ready = crate::common::wait_until(crate::common::STEP_LIMIT, || {
            set.sentinels.iter().all(|s| {
                let master = cli(s.port, &["SENTINEL", "get-master-addr-by-name", MASTER]);
                let replicas = cli(s.port, &["SENTINEL", "replicas", MASTER]);
                master.len() == 2 && (set.replica.is_none() || !replicas.is_empty())
            })
        });
        if !ready {
            return skip(test, "the sentinels never knew the master and its replica");
        }
        Some(set)
    }

    /// `redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster/NAME`.
    pub fn url(&self, name: &str) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+sentinel://{}/{MASTER}/{name}", hosts.join(","))
    }

    /// The port of the master the sentinels name now.
    pub fn master_port(&self) -> Option<u16> {
        let said = cli(
            self.sentinels[0].port,
            &["SENTINEL", "get-master-addr-by-name", MASTER],
        );
        said.get(1)?.parse().ok()
    }
}

fn skip(test: &str, why: &str) -> Option<SentinelSet> {
    if std::env::var_os("RETRY_REQUIRE_REDIS").is_some_and(|v| v == "1") {
        panic!("no Sentinel set (RETRY_REQUIRE_REDIS=1): {test}: {why}");
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: no Sentinel set: {test} did not run ({why}); set RETRY_REQUIRE_REDIS=1 to make \
         this a failure"
    );
    None
}

/// A sentinel on a free port that watches the master on `master`: its configuration is a file
/// of its own, which it rewrites as it learns.
fn start_sentinel(test: &str, master: u16) -> Result<Sentinel, String> {
    let dir = crate::common::temp_dir(&format!("sentinel-{test}"));
    let port = free_port();
    let conf = dir.join("sentinel.conf");
    let text = format!(
        "port {port}\nbind 127.0.0.1\ndir {dir}\nsentinel monitor {MASTER} 127.0.0.1 {master} 2\n\
         sentinel down-after-milliseconds {MASTER} 1000\nsentinel failover-timeout {MASTER} 3000\n\
         sentinel parallel-syncs {MASTER} 1\n",
        dir = dir.display()
    );
    std::fs::write(&conf, text).map_err(|e| e.to_string())?;
    let log = std::fs::File::create(dir.join("sentinel.log")).map_err(|e| e.to_string())?;
    let child = Command::new("redis-server")
        .arg(&conf)
        .arg("--sentinel")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("redis-server --sentinel: {e}"))?;
    let sentinel = Sentinel { child, port };
    let answers = crate::common::wait_until(Duration::from_secs(5), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    match answers {
        true => Ok(sentinel),
        false => Err(format!("the sentinel on port {port} never answered")),
    }
}
