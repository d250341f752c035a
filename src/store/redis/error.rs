//! Why the fleet quota store could not be used, as one line that never holds the password.

use std::fmt;
use std::io;

use crate::store::redis::resp::{ExchangeError, one_line};

/// Why the fleet store could not be used. The run warns with it, once, and goes on with the
/// local store.
#[derive(Debug)]
pub enum RedisStoreError {
    /// The host name did not resolve, or not within the deadline.
    Resolve { host: String, source: io::Error },
    /// No connection, or the server refused it (a wrong password) or did not answer in time.
    Connect {
        server: String,
        source: ExchangeError,
    },
    /// The script failed, or the server did not answer it in time.
    Command {
        server: String,
        source: ExchangeError,
    },
    /// The script's answer was not a number of tokens.
    Reply { server: String, reply: String },
    /// No sentinel named a master that could be used, within the deadline.
    NoMaster { sentinels: String, why: String },
}

impl fmt::Display for RedisStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisStoreError::Resolve { host, source } => write!(
                f,
                "cannot resolve the Redis host '{}': {}",
                one_line(host),
                one_line(&source.to_string())
            ),
            RedisStoreError::Connect { server, source } => {
                write!(f, "cannot use Redis at {server}: {source}")
            }
            RedisStoreError::Command { server, source } => {
                write!(f, "the quota update failed on Redis at {server}: {source}")
            }
            RedisStoreError::NoMaster { sentinels, why } => {
                write!(f, "cannot find the {sentinels}: {}", one_line(why))
            }
            RedisStoreError::Reply { server, reply } => write!(
                f,
                "Redis at {server} answered the quota update with '{}', not a number of tokens",
                one_line(reply)
            ),
        }
    }
}

/// The code words of a server that refuses the password or the user: a misconfiguration, not
/// an outage. Besides Redis 6's three, the `ERR` phrases of a server that has no password for
/// the default user, and of servers and proxies before ACLs.
pub const REFUSALS: [&str; 7] = [
    "WRONGPASS",
    "NOAUTH",
    "NOPERM",
    "ERR AUTH <password> called without any password configured",
    "ERR Client sent AUTH, but no password is set",
    "ERR invalid password",
    "ERR invalid username-password pair",
];

/// What a Redis server that refused the password or the user did, with its code word (one of
/// [`REFUSALS`]).
pub fn refusal_words(code: &str) -> String {
    let what = match code {
        "WRONGPASS" => "refused the password",
        "NOAUTH" => "asks for a password and was given none",
        "NOPERM" => "does not let the user run retry's commands",
        "ERR AUTH <password> called without any password configured" => {
            "has no password for its default user: name the ACL user in the URL or in \
             RETRY_REDIS_USER"
        }
        "ERR Client sent AUTH, but no password is set" => "asks for no password and was given one",
        "ERR invalid username-password pair" => "refused the user and password",
        _ => "refused the password or the user",
    };
    format!("{what} ({code})")
}

impl RedisStoreError {
    /// The code word (one of [`REFUSALS`]) when the server refused the password or the user.
    pub fn refusal(&self) -> Option<&'static str> {
        let code = match self {
            RedisStoreError::Connect { source, .. } | RedisStoreError::Command { source, .. } => {
                source.code()?
            }
            _ => return None,
        };
        REFUSALS.into_iter().find(|refusal| *refusal == code)
    }
}

impl std::error::Error for RedisStoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RedisStoreError::Resolve { source, .. } => Some(source),
            RedisStoreError::Connect { source, .. } | RedisStoreError::Command { source, .. } => {
                Some(source)
            }
            RedisStoreError::Reply { .. } | RedisStoreError::NoMaster { .. } => None,
        }
    }
}
