//! A master that Redis Sentinel watches (`redis+sentinel://S1[,S2…]/MASTER/…`): the sentinels
//! are asked in turn where MASTER is, and the node they name is used only once it says, with
//! `ROLE`, that it is a master. Within the exchange's one deadline: a sentinel that is down,
//! slow, or does not know MASTER is passed over for the next; a node that is not the master
//! (a failover under way, an old master come back as a replica) sends `retry` back to the
//! sentinels, which may know the new one by then. The sentinels get no AUTH: the credentials
//! of the URL are the master's (docs/redis.md#sentinel).

use std::fmt;

use crate::store::redis::error::REFUSALS;
use crate::store::redis::resp::{Addr, Deadline, ExchangeError, Node, Reply};

/// The sentinels to ask, in the URL's order, and the name of the master they watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sentinels {
    pub addrs: Vec<Addr>,
    pub master: String,
}

impl fmt::Display for Sentinels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let addrs: Vec<String> = self.addrs.iter().map(Addr::to_string).collect();
        write!(
            f,
            "master '{}' of sentinels {}",
            self.master,
            addrs.join(",")
        )
    }
}

/// What went wrong with one sentinel or the node it named, for the line that says why no
/// master was found.
#[derive(Debug)]
pub enum Miss {
    /// The sentinel could not be asked.
    Sentinel(Addr, ExchangeError),
    /// It does not watch a master of that name.
    Unknown(Addr),
    /// It answered something that is not an address.
    Garbled(Addr),
    /// The node it named could not be used.
    Master(Addr, ExchangeError),
    /// The node it named is not a master (yet, or any more).
    NotMaster(Addr, String),
}

impl fmt::Display for Miss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Miss::Sentinel(a, e) => write!(f, "sentinel {a}: {e}"),
            Miss::Unknown(a) => write!(f, "sentinel {a} knows no such master"),
            Miss::Garbled(a) => write!(f, "sentinel {a} answered no address"),
            Miss::Master(a, e) => write!(f, "the master it named, {a}: {e}"),
            Miss::NotMaster(a, role) => write!(f, "{a}, named the master, is a {role}"),
        }
    }
}

/// Finds the master and returns a connection to it: each sentinel in turn is reached with
/// `reach` (a plain connection), asked for the master's address, and the node named is opened
/// with `open` (the master's credentials and database) and asked for its `ROLE`. The rounds go
/// on while the deadline leaves time, so that a failover that ends within it is followed.
/// Every miss is returned when none gave a master; a master that refuses the credentials ends
/// the search at once, as the last miss (no other node will take them either).
pub fn find_master(
    sentinels: &Sentinels,
    deadline: &Deadline,
    mut reach: impl FnMut(&Addr) -> Result<Node, ExchangeError>,
    mut open: impl FnMut(&Addr) -> Result<Node, ExchangeError>,
) -> Result<Node, Vec<Miss>> {
    let mut misses = Vec::new();
    loop {
        let round = misses.len();
        for sentinel in &sentinels.addrs {
            if deadline.left().is_err() {
                return Err(misses);
            }
            let master = match ask(sentinel, &sentinels.master, deadline, &mut reach) {
                Ok(master) => master,
                Err(miss) => {
                    misses.push(miss);
                    continue;
                }
            };
            match open(&master).and_then(|mut node| role(&mut node, deadline).map(|r| (node, r))) {
                Ok((node, role)) if role == "master" => return Ok(node),
                Ok((_, role)) => misses.push(Miss::NotMaster(master, role)),
                Err(e) => {
                    let refused = e.code().is_some_and(|code| REFUSALS.contains(&code));
                    misses.push(Miss::Master(master, e));
                    if refused {
                        return Err(misses);
                    }
                }
            }
        }
        // Every sentinel reached says it watches no such master: a name written wrong, which
        // asking again will not mend.
        if misses[round..]
            .iter()
            .all(|m| matches!(m, Miss::Unknown(_)))
        {
            return Err(misses);
        }
        // A whole round without a master: the sentinels may be electing one. Ask again after
        // a short pause, while the deadline allows.
        let pause = std::time::Duration::from_millis(20);
        match deadline.left() {
            Ok(left) if left > pause => std::thread::sleep(pause),
            _ => return Err(misses),
        }
    }
}

/// `SENTINEL get-master-addr-by-name MASTER` on `sentinel`.
fn ask(
    sentinel: &Addr,
    master: &str,
    deadline: &Deadline,
    reach: &mut impl FnMut(&Addr) -> Result<Node, ExchangeError>,
) -> Result<Addr, Miss> {
    let failed = |e| Miss::Sentinel(sentinel.clone(), e);
    let mut node = reach(sentinel).map_err(failed)?;
    let words: [&[u8]; 3] = [b"SENTINEL", b"get-master-addr-by-name", master.as_bytes()];
    match node.request(&words, deadline).map_err(failed)? {
        Reply::Array(Some(items)) => match items.as_slice() {
            [Reply::Bulk(Some(host)), Reply::Bulk(Some(port))] => {
                let host = String::from_utf8_lossy(host).into_owned();
                let port = String::from_utf8_lossy(port).parse::<u16>();
                match port {
                    Ok(port) if !host.is_empty() => Ok(Addr { host, port }),
                    _ => Err(Miss::Garbled(sentinel.clone())),
                }
            }
            _ => Err(Miss::Garbled(sentinel.clone())),
        },
        Reply::Array(None) | Reply::Bulk(None) => Err(Miss::Unknown(sentinel.clone())),
        _ => Err(Miss::Garbled(sentinel.clone())),
    }
}

/// The node's role as `ROLE` names it: `master`, `slave` or `sentinel`.
fn role(node: &mut Node, deadline: &Deadline) -> Result<String, ExchangeError> {
    match node.request(&[b"ROLE"], deadline)? {
        Reply::Array(Some(items)) => match items.first() {
            Some(Reply::Bulk(Some(role))) => Ok(String::from_utf8_lossy(role).into_owned()),
            _ => Ok("node that answered ROLE with no role".into()),
        },
        _ => Ok("node that answered ROLE with no list".into()),
    }
}

/// The words of a miss whose sentinel or node said something, cleaned by `clean` (the
/// password is never shown).
pub fn describe(misses: &[Miss], clean: impl Fn(String) -> String) -> String {
    if misses.is_empty() {
        return "the time for it ran out before any sentinel was asked".into();
    }
    if misses.iter().all(|m| matches!(m, Miss::Unknown(_))) {
        return "no sentinel knows such a master".into();
    }
    // The last round says most: a sentinel down at the start may have been passed over since.
    let mut seen: Vec<String> = Vec::new();
    for m in misses.iter().rev() {
        let text = clean(m.to_string());
        if !seen.contains(&text) {
            seen.push(text);
        }
        if seen.len() == 3 {
            break;
        }
    }
    seen.join("; ")
}
