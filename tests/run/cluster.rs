//! The fleet's state on a Redis Cluster of three nodes (docs/redis.md): every run names one
//! node, and the quotas, dead letters and every other option whose keys hash to another node
//! are followed there (`MOVED`, and `ASK` while a slot migrates), so that every run shares each
//! bucket and none falls back to its own machine; and, in a test that `.ci/run` runs
//! (`cargo test --test run cluster:: -- --ignored`), a primary killed while runs share a quota
//! and give up to a stream, and its replica promoted by the cluster, loses no record and adds
//! none twice.
//!
//! The test starts its own three `redis-server`s on free ports and makes them a cluster by hand,
//! as `redis-cli --cluster create` would without its pauses of a second: each node takes a third
//! of the slots, and the first meets the two others; they are killed when it ends, also when it
//! fails. Without `redis-server` it says so loudly on stderr and passes, unless
//! RETRY_REQUIRE_REDIS=1 (as CI sets it) makes it fail. Its module comes early in the order of
//! names that libtest starts the tests in: the nodes take seconds to agree.

use crate::common::every_option::every_option;
use crate::common::redis_server::{Server, cli, free_port, in_step};
use crate::common::{retry, runtime_dir, stderr_of};

use std::io::Write;
use std::path::PathBuf;

/// Three nodes that hold every slot between them, killed when dropped (each `Server` is).
struct Cluster {
    nodes: Vec<Server>,
    /// The port of each node's cluster bus.
    buses: Vec<u16>,
}

/// A node of a cluster on a free port, with these arguments more; its cluster bus on `bus`.
fn node(test: &str, bus: u16, extra: &[&str]) -> Option<Server> {
    let bus = bus.to_string();
    let mut args = vec![
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-port",
        &bus,
    ];
    args.extend_from_slice(extra);
    Server::start(test, &args)
}

/// Says loudly that no cluster could be made, or fails under RETRY_REQUIRE_REDIS=1.
fn skip<T>(why: &str) -> Option<T> {
    if std::env::var_os("RETRY_REQUIRE_REDIS").is_some_and(|v| v == "1") {
        panic!("no Redis Cluster (RETRY_REQUIRE_REDIS=1): {why}");
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: no Redis Cluster could be made: {why}; set RETRY_REQUIRE_REDIS=1 to make this \
         a failure"
    );
    None
}

impl Cluster {
    fn start() -> Option<Cluster> {
        Cluster::start_with("cluster", &[])
    }

    /// Three nodes named `test-0` to `test-2`, each with these arguments more.
    fn start_with(test: &str, extra: &[&str]) -> Option<Cluster> {
        // The three start at once: a node says its cluster is ok no sooner than two seconds after
        // it started.
        let buses: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let nodes: Vec<Option<Server>> = std::thread::scope(|s| {
            let starting: Vec<_> = (0..3)
                .map(|i| {
                    let bus = buses[i];
                    s.spawn(move || node(&format!("{test}-{i}"), bus, extra))
                })
                .collect();
            starting.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let nodes = nodes.into_iter().collect::<Option<Vec<Server>>>()?;
        let cluster = Cluster { nodes, buses };
        match cluster.create() {
            Ok(()) => Some(cluster),
            Err(why) => skip(&why),
        }
    }

    /// A fourth node, with these arguments more, made the replica of `primary` and in step
    /// with it.
    fn add_replica(&self, test: &str, primary: &Server, extra: &[&str]) -> Option<Server> {
        let bus = free_port();
        let replica = node(test, bus, extra)?;
        let id = cli(primary.port, &["CLUSTER", "MYID"])[0].clone();
        let (port, bus) = (replica.port.to_string(), bus.to_string());
        let meet = ["CLUSTER", "MEET", "127.0.0.1", &port, &bus];
        if cli(self.nodes[0].port, &meet) != ["OK"] {
            return skip(&format!("{meet:?} was refused"));
        }
        let knows = || {
            cli(replica.port, &["CLUSTER", "NODES"])
                .iter()
                .any(|l| l.starts_with(&id))
        };
        if !crate::common::wait_until(crate::common::STEP_LIMIT, knows) {
            return skip("the new node never learned of its primary");
        }
        if cli(replica.port, &["CLUSTER", "REPLICATE", &id]) != ["OK"] {
            return skip("CLUSTER REPLICATE was refused");
        }
        // In step with its primary, and known as its replica by every primary, which elect it.
        let ready = || {
            let link = cli(replica.port, &["INFO", "replication"])
                .iter()
                .any(|l| l.trim() == "master_link_status:up");
            let known = self.nodes.iter().all(|n| {
                cli(n.port, &["CLUSTER", "NODES"])
                    .iter()
                    .any(|l| l.contains(&format!(":{port}@")) && l.contains(&id))
            });
            link && known
        };
        if !crate::common::wait_until(crate::common::STEP_LIMIT, ready) {
            return skip("the replica never came in step with its primary");
        }
        Some(replica)
    }

    fn create(&self) -> Result<(), String> {
        let ranges = [("0", "5460"), ("5461", "10922"), ("10923", "16383")];
        for (epoch, (node, (low, high))) in self.nodes.iter().zip(ranges).enumerate() {
            let epoch = (epoch + 1).to_string();
            for args in [
                &["CLUSTER", "SET-CONFIG-EPOCH", &epoch][..],
                &["CLUSTER", "ADDSLOTSRANGE", low, high],
            ] {
                let said = cli(node.port, args);
                if said != ["OK"] {
                    return Err(format!("{args:?} on port {}: {said:?}", node.port));
                }
            }
        }
        for (node, bus) in self.nodes.iter().zip(&self.buses).skip(1) {
            let (port, bus) = (node.port.to_string(), bus.to_string());
            let meet = ["CLUSTER", "MEET", "127.0.0.1", &port, &bus];
            let said = cli(self.nodes[0].port, &meet);
            if said != ["OK"] {
                return Err(format!("{meet:?}: {said:?}"));
            }
        }
        let ok = |node: &Server| {
            cli(node.port, &["CLUSTER", "INFO"])
                .iter()
                .any(|l| l.trim() == "cluster_state:ok")
        };
        if crate::common::wait_until(crate::common::STEP_LIMIT, || self.nodes.iter().all(ok)) {
            Ok(())
        } else {
            Err("the cluster's state never became ok".into())
        }
    }

    /// The node that holds `key`'s slot now.
    fn owner(&self, key: &str) -> &Server {
        let slot: u16 = cli(self.nodes[0].port, &["CLUSTER", "KEYSLOT", key])[0]
            .parse()
            .unwrap();
        // CLUSTER NODES: id addr@bus flags master - ping pong epoch state slot-ranges...
        let table = cli(self.nodes[0].port, &["CLUSTER", "NODES"]);
        for line in table {
            let words: Vec<&str> = line.split_whitespace().collect();
            let holds = words.iter().skip(8).any(|range| {
                let (low, high) = range.split_once('-').unwrap_or((range, range));
                match (low.parse::<u16>(), high.parse::<u16>()) {
                    (Ok(low), Ok(high)) => (low..=high).contains(&slot),
                    _ => false,
                }
            });
            if holds {
                let port: u16 = words[1]
                    .split(['@', ','])
                    .next()
                    .and_then(|a| a.rsplit_once(':'))
                    .and_then(|(_, p)| p.parse().ok())
                    .unwrap();
                return self.nodes.iter().find(|n| n.port == port).unwrap();
            }
        }
        panic!("no node holds slot {slot}");
    }

    fn keys_on(&self, node: &Server) -> u64 {
        cli(node.port, &["DBSIZE"])[0].parse().unwrap()
    }
}

/// A run that fails, retries once and gives up, against the quota at `url`: its log.
/// `retry ARGS` in `dir`, its runtime and state there, with no Redis credentials of the test's
/// own environment, bounded in time.
fn run_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    retry()
        .current_dir(dir)
        .env("XDG_RUNTIME_DIR", dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env_remove("RETRY_REDIS_PASSWORD")
        .env_remove("RETRY_REDIS_USER")
        .timeout(crate::common::STEP_LIMIT)
        .args(args)
        .output()
        .unwrap()
}

fn failing_run(url: &str, runtime: &PathBuf) -> String {
    let out = retry()
        .env("XDG_RUNTIME_DIR", runtime)
        .env_remove("RETRY_REDIS_PASSWORD")
        .args(["-v", "-n", "2", "-d", "0", "--quota", url, "--", "false"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    stderr_of(&out)
}

// One test, as a cluster is ok no sooner than two seconds after its nodes start.
#[test]
fn quotas_on_a_cluster_are_followed_to_their_node_and_shared() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    quotas_on_any_node_are_shared_through_the_node_named(&cluster);
    a_quota_whose_slot_migrates_is_followed_to_the_node_it_moves_to(&cluster);
    dead_letters_on_any_node_are_followed_to_the_node_of_their_stream(&cluster);
    every_option_is_followed_from_a_node_that_holds_none_of_its_keys(&cluster);
}

fn every_option_is_followed_from_a_node_that_holds_none_of_its_keys(cluster: &Cluster) {
    let named = &cluster.nodes[0];
    let dir = runtime_dir("cluster-every");
    // A store whose quota and stream both live on other nodes than the one named.
    let elsewhere = |key: String| cluster.owner(&key).port != named.port;
    let name = (0..100)
        .map(|i| format!("every{i}"))
        .find(|n| elsewhere(format!("retry:quota:{n}")) && elsewhere(format!("retry:dead:{{{n}}}")))
        .expect("a name whose keys are on other nodes");
    let url = format!("redis://127.0.0.1:{}/{name}", named.port);
    let run = |args: &[&str]| run_in(&dir, args);
    every_option(&dir, &url, &run);
    let quota = format!("retry:quota:{name}");
    assert_eq!(cli(cluster.owner(&quota).port, &["EXISTS", &quota]), ["1"]);
    // The lock's fencing counter too, on its node, which is not the one named.
    let fence = format!("retry:lock:{{{name}}}:fence");
    assert_ne!(cluster.owner(&fence).port, named.port);
    assert_eq!(cli(cluster.owner(&fence).port, &["EXISTS", &fence]), ["1"]);
}

fn dead_letters_on_any_node_are_followed_to_the_node_of_their_stream(cluster: &Cluster) {
    let named = &cluster.nodes[0];
    let runtime = runtime_dir("cluster-dead");
    // A store whose stream lives on another node than the one named.
    let name = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
        .into_iter()
        .find(|n| cluster.owner(&format!("retry:dead:{{{n}}}")).port != named.port)
        .expect("a name whose stream is on another node");
    let url = format!("redis://127.0.0.1:{}/{name}", named.port);
    let run = |args: &[&str]| {
        retry()
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("XDG_STATE_HOME", runtime.join("state"))
            .env_remove("RETRY_REDIS_PASSWORD")
            .args(args)
            .output()
            .unwrap()
    };
    for _ in 0..2 {
        let out = run(&["--dead-letter", &url, "-n", "1", "--", "false"]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
        assert!(!stderr_of(&out).contains("warning"), "{}", stderr_of(&out));
    }
    let owner = cluster.owner(&format!("retry:dead:{{{name}}}"));
    assert_eq!(
        cli(owner.port, &["XLEN", &format!("retry:dead:{{{name}}}")]),
        ["2"]
    );
    let out = run(&["--replay", &url, "--dry-run", "--log-format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let listed = String::from_utf8_lossy(&out.stdout)
        .matches("\"id\":")
        .count();
    assert!(listed >= 2, "{}", String::from_utf8_lossy(&out.stdout));
    let out = run(&["--stats", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // A database is a single server's: a cluster has only database 0, and says so in one line.
    let db = format!("redis://127.0.0.1:{}/1/{name}", named.port);
    let out = run(&["--stats", &db]);
    let err = stderr_of(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cluster"), "{err}");
}

fn quotas_on_any_node_are_shared_through_the_node_named(cluster: &Cluster) {
    let named = &cluster.nodes[0];
    let runtime = runtime_dir("cluster-moved");
    let names = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
    ];
    // The names' runs at once, each name's two one after the other.
    std::thread::scope(|s| {
        for name in names {
            let runtime = &runtime;
            s.spawn(move || {
                // No deposits, no refill: each run's retry takes one token of five.
                let url = format!(
                    "redis://127.0.0.1:{}/{name}:ratio=0,floor=0,cap=5",
                    named.port
                );
                for left in ["4.00", "3.00"] {
                    let log = failing_run(&url, runtime);
                    assert!(!log.contains("warning"), "{name}: {log}");
                    assert!(
                        log.contains(&format!("retry, {left} tokens left")),
                        "{name}, {left} expected: {log}"
                    );
                }
            });
        }
    });
    // Each bucket lives on the node of its slot, and some are on nodes that the runs did not
    // name.
    let total: u64 = cluster.nodes.iter().map(|n| cluster.keys_on(n)).sum();
    assert_eq!(total, names.len() as u64);
    let elsewhere = names
        .iter()
        .filter(|name| cluster.owner(&format!("retry:quota:{name}")).port != named.port)
        .count();
    assert!(elsewhere > 0, "every name hashed to the node named");
    assert!(cluster.keys_on(named) < names.len() as u64);
}

fn a_quota_whose_slot_migrates_is_followed_to_the_node_it_moves_to(cluster: &Cluster) {
    let key = "retry:quota:moving";
    let from = cluster.owner(key);
    let to = cluster.nodes.iter().find(|n| n.port != from.port).unwrap();
    let slot = cli(from.port, &["CLUSTER", "KEYSLOT", key])[0].clone();
    let id = |node: &Server| cli(node.port, &["CLUSTER", "MYID"])[0].clone();
    let (from_id, to_id) = (id(from), id(to));
    assert_eq!(
        cli(
            to.port,
            &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id]
        ),
        ["OK"]
    );
    assert_eq!(
        cli(
            from.port,
            &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id]
        ),
        ["OK"]
    );
    // The key is not on the node that still owns the slot: it answers ASK, and the bucket is
    // made on the node the slot moves to.
    let runtime = runtime_dir("cluster-ask");
    let url = format!(
        "redis://127.0.0.1:{}/moving:ratio=0,floor=0,cap=5",
        from.port
    );
    let before = (cluster.keys_on(from), cluster.keys_on(to));
    let log = failing_run(&url, &runtime);
    assert!(!log.contains("warning"), "{log}");
    assert!(log.contains("retry, 4.00 tokens left"), "{log}");
    assert_eq!(
        (cluster.keys_on(from), cluster.keys_on(to)),
        (before.0, before.1 + 1)
    );
    // The migration ends: the slot is the other node's, and the old one answers MOVED.
    for node in &cluster.nodes {
        cli(node.port, &["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
    }
    let log = failing_run(&url, &runtime);
    assert!(!log.contains("warning"), "{log}");
    assert!(log.contains("retry, 3.00 tokens left"), "{log}");
}

/// A failover that cannot fit in `cargo test`'s time: the primaries take a few seconds to see a
/// primary fail and elect its replica. `.ci/run` runs it (`cargo test --test run -- --ignored`).
#[test]
#[ignore = "a Cluster failover takes seconds: run with --ignored, as .ci/run does"]
fn a_primary_failing_over_while_runs_give_up_and_share_a_quota_loses_no_record_and_adds_none_twice()
{
    // A primary is deemed failing after a second without an answer.
    let timeout = ["--cluster-node-timeout", "1000"];
    let Some(mut cluster) = Cluster::start_with("cluster-failover", &timeout) else {
        return;
    };
    // A store whose quota and stream live on one primary, which the URL does not name.
    let named = cluster.nodes[0].port;
    let name = (0..100)
        .map(|i| format!("jobs{i}"))
        .find(|n| {
            let quota = cluster.owner(&format!("retry:quota:{n}")).port;
            quota != named && cluster.owner(&format!("retry:dead:{{{n}}}")).port == quota
        })
        .expect("a name whose quota and stream share a primary");
    let (quota_key, stream) = (
        format!("retry:quota:{name}"),
        format!("retry:dead:{{{name}}}"),
    );
    let primary = cluster.owner(&quota_key).port;
    let Some(replica) = cluster.add_replica(
        "cluster-failover-replica",
        cluster.owner(&quota_key),
        &timeout,
    ) else {
        return;
    };
    let dir = runtime_dir("cluster-failover");
    let url = format!("redis://127.0.0.1:{named}/{name}");
    let quota = format!("{url}:ratio=0,floor=0,cap=1000");
    let run = |args: &[&str]| run_in(&dir, args);
    let give_up = |n: usize| {
        std::thread::scope(|s| {
            for _ in 0..n {
                s.spawn(|| {
                    let out = run(&[
                        "-n",
                        "2",
                        "-d",
                        "0",
                        "--quota",
                        &quota,
                        "--dead-letter",
                        &url,
                        "--",
                        "false",
                    ]);
                    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
                });
            }
        });
    };
    give_up(10);
    assert_eq!(cli(primary, &["XLEN", &stream]), ["10"]);
    // What the primary holds has reached the replica before the primary dies.
    assert!(
        in_step(primary, replica.port),
        "the replica never had what the primary holds"
    );
    let at = cluster
        .nodes
        .iter()
        .position(|n| n.port == primary)
        .unwrap();
    let _ = cluster.nodes[at].child.kill();
    let _ = cluster.nodes[at].child.wait();
    // Runs while the primaries notice and elect, two at a time over the three seconds or so it
    // takes: each gives up to the stream or, the stream out of reach, to the file kept on this
    // machine.
    for _ in 0..10 {
        give_up(2);
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let promoted = || {
        let ok = |port: u16| {
            cli(port, &["CLUSTER", "INFO"])
                .iter()
                .any(|l| l.trim() == "cluster_state:ok")
        };
        let owner = cluster.nodes.iter().filter(|n| n.port != primary).all(|n| {
            cli(n.port, &["CLUSTER", "NODES"])
                .iter()
                .any(|l| l.contains(&format!(":{}@", replica.port)) && l.contains("master"))
        });
        owner && ok(named) && ok(replica.port)
    };
    assert!(
        crate::common::wait_until(std::time::Duration::from_secs(30), promoted),
        "the cluster never made the replica a primary: {:?}",
        cli(named, &["CLUSTER", "NODES"])
    );
    // Runs after it reach the new primary, and the first of them moves the kept records there.
    give_up(10);
    let out = run(&[
        "--replay",
        &url,
        "--dry-run",
        "--log-format",
        "json",
        "--all",
    ]);
    let listing = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let ids: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split("\"id\":\"").nth(1)?.split('"').next())
        .collect();
    let unique: std::collections::BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(ids.len(), 40, "every run that gave up, once: {listing}");
    assert_eq!(unique.len(), 40, "none twice: {listing}");
    assert_eq!(cli(replica.port, &["XLEN", &stream]), ["40"]);
    // The quota lives on the new primary: the ten runs before the failover and the ten after
    // each took their token there.
    let tokens = cli(replica.port, &["HGET", &quota_key, "tokens"]);
    let tokens: f64 = tokens[0].parse().unwrap();
    assert!((960.0..=980.0).contains(&tokens), "{tokens}");
}
