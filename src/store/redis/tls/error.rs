//! Why TLS could not be used, as one line that names the file or the host and says why in
//! plain words, and the variables that name the files, which its lines name.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::SystemTime;

use crate::store::redis::resp::{ExchangeError, one_line};

/// The variable that names a PEM bundle of the CAs to trust instead of the system's.
pub const CA_VAR: &str = "RETRY_REDIS_CA";
/// The variable that names the client's certificate (PEM, the chain in order).
pub const CERT_VAR: &str = "RETRY_REDIS_CERT";
/// The variable that names the client certificate's private key (PEM).
pub const KEY_VAR: &str = "RETRY_REDIS_KEY";

/// What is wrong with a file that TLS was given.
#[derive(Debug)]
pub enum FileProblem {
    /// It cannot be opened or read.
    Unreadable(io::Error),
    /// It is a directory, a FIFO, a device.
    NotAFile,
    /// It is larger than any PEM file of certificates or a key: over this many bytes.
    TooLarge(u64),
    /// It holds no certificate in PEM (`-----BEGIN CERTIFICATE-----`).
    NoCertificate,
    /// It holds no private key in PEM.
    NoKey,
    /// A key that other users can read or write, by this mode.
    OpenToOthers(u32),
    /// A key that belongs to another user, by this uid.
    OwnedByOther(u32),
    /// The key does not belong to the certificate of `RETRY_REDIS_CERT`, or is of a kind TLS
    /// cannot sign with.
    KeyMismatch(String),
}

/// What went wrong with the server, during the handshake or after it.
#[derive(Debug)]
pub enum ServerProblem {
    /// Its certificate is for other names (those it holds, as far as they were read).
    OtherName(Vec<String>),
    /// Its certificate expired, at this time when known.
    Expired(Option<SystemTime>),
    /// Its certificate is not valid yet.
    NotYetValid,
    /// Its certificate was issued by a CA that is not trusted: not in this bundle, or not among
    /// the system's roots (`None`).
    UnknownIssuer(Option<PathBuf>),
    /// Its certificate is refused for another reason, in rustls's words.
    BadCertificate(String),
    /// It wants a client certificate and none was given.
    WantsClientCert,
    /// It refused the client certificate given.
    RefusedClientCert,
    /// What it sent is not TLS: a plain Redis port, say.
    NotTls,
    /// The connection failed or was closed, or the deadline passed, during the handshake.
    Exchange(ExchangeError),
    /// The host is not a name that a certificate can hold.
    BadName,
    /// Anything else, in rustls's words.
    Other(String),
}

/// A failure of TLS: with a file it was given, or with the server.
#[derive(Debug)]
pub enum TlsError {
    /// A file that `var` names cannot be used.
    File {
        var: &'static str,
        path: PathBuf,
        problem: FileProblem,
    },
    /// One of `RETRY_REDIS_CERT` and `RETRY_REDIS_KEY` is set and the other is not.
    Half {
        given: &'static str,
        missing: &'static str,
    },
    /// The system has no trusted roots to read, and `RETRY_REDIS_CA` is not set.
    NoRoots(String),
    /// The server at `host` failed.
    Server {
        host: String,
        problem: ServerProblem,
    },
}

impl TlsError {
    /// The TLS failure behind an error of a [`TlsStream`]'s read or write, if it is one.
    pub fn of_io(e: &io::Error) -> Option<&TlsError> {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<TlsError>())
    }

    /// The reason alone, without the file or the host: for a message that names them already.
    pub fn reason(&self) -> String {
        match self {
            TlsError::File { problem, .. } => problem.to_string(),
            TlsError::Half { given, missing } => {
                format!("{given} is set without {missing}: a client certificate needs both")
            }
            TlsError::NoRoots(why) => format!(
                "the system's trusted certificates cannot be read ({why}); install \
                 ca-certificates, or name the server's CA bundle in {CA_VAR}"
            ),
            TlsError::Server { host, problem } => problem.say(host),
        }
    }
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::File { var, path, .. } => {
                write!(f, "{var} {}: {}", path.display(), self.reason())
            }
            TlsError::Half { .. } | TlsError::NoRoots(_) => write!(f, "{}", self.reason()),
            TlsError::Server { host, .. } => write!(f, "TLS with {host}: {}", self.reason()),
        }
    }
}

impl std::error::Error for TlsError {}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileProblem::Unreadable(e) => write!(f, "cannot be read: {}", one_line(&e.to_string())),
            FileProblem::NotAFile => write!(f, "is not a regular file"),
            FileProblem::TooLarge(most) => {
                write!(f, "is larger than {} MiB, which no PEM file is", most >> 20)
            }
            FileProblem::NoCertificate => write!(f, "holds no certificate in PEM"),
            FileProblem::NoKey => write!(f, "holds no private key in PEM"),
            FileProblem::OpenToOthers(mode) => write!(
                f,
                "other users can read it (mode {:04o}): a private key must be readable by its \
                 owner only (chmod 600), as ssh asks of one",
                mode & 0o7777
            ),
            FileProblem::OwnedByOther(uid) => write!(
                f,
                "belongs to uid {uid}, not to this user: a private key must be this user's own, \
                 as ssh asks of one"
            ),
            FileProblem::KeyMismatch(why) => write!(
                f,
                "cannot sign for the certificate of {CERT_VAR}: {}",
                one_line(why)
            ),
        }
    }
}

impl ServerProblem {
    fn say(&self, host: &str) -> String {
        match self {
            ServerProblem::OtherName(names) if names.is_empty() => {
                format!("the server's certificate is for another name, not {host}")
            }
            ServerProblem::OtherName(names) => format!(
                "the server's certificate is for another name ({}), not {host}",
                one_line(&names.join(", "))
            ),
            ServerProblem::Expired(Some(at)) => format!(
                "the server's certificate expired at {}",
                humantime::format_rfc3339_seconds(*at)
            ),
            ServerProblem::Expired(None) => "the server's certificate has expired".to_string(),
            ServerProblem::NotYetValid => "the server's certificate is not valid yet".to_string(),
            ServerProblem::UnknownIssuer(Some(ca)) => format!(
                "the server's certificate was issued by an unknown authority, none of those in \
                 {CA_VAR} {}",
                ca.display()
            ),
            ServerProblem::UnknownIssuer(None) => format!(
                "the server's certificate was issued by an unknown authority, none of the \
                 system's trusted roots (name the server's CA bundle in {CA_VAR})"
            ),
            ServerProblem::BadCertificate(why) => {
                format!("the server's certificate is refused: {}", one_line(why))
            }
            ServerProblem::WantsClientCert => format!(
                "the server wants a client certificate: name one in {CERT_VAR} and its key in \
                 {KEY_VAR}"
            ),
            ServerProblem::RefusedClientCert => {
                format!("the server refused the client certificate of {CERT_VAR}")
            }
            ServerProblem::NotTls => {
                "the server does not answer in TLS (is this port a plain redis:// one?)".to_string()
            }
            ServerProblem::Exchange(e) => format!("the handshake failed: {e}"),
            ServerProblem::BadName => {
                "the host is not a name or an address a certificate can hold".to_string()
            }
            ServerProblem::Other(why) => one_line(why),
        }
    }
}
