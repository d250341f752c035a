//! The files TLS is given: which the environment names, and their certificates and key read
//! by the rules a private key is kept by.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::error::{CA_VAR, CERT_VAR, FileProblem, KEY_VAR, TlsError};

/// The most bytes a PEM file may take: a bundle of every root a system trusts takes 200 KiB.
const MAX_PEM: u64 = 4 << 20;

/// The files TLS uses, as the environment names them; unset or empty: none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// CAs to trust instead of the system's roots (`RETRY_REDIS_CA`).
    pub ca: Option<PathBuf>,
    /// The client's certificate (`RETRY_REDIS_CERT`).
    pub cert: Option<PathBuf>,
    /// Its private key (`RETRY_REDIS_KEY`).
    pub key: Option<PathBuf>,
}

impl TlsFiles {
    /// The files the process's environment names.
    pub fn from_env() -> TlsFiles {
        TlsFiles::from_vars(|name| std::env::var_os(name))
    }

    /// The files `var` names, given a variable's name.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> TlsFiles {
        let path = |name| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        TlsFiles {
            ca: path(CA_VAR),
            cert: path(CERT_VAR),
            key: path(KEY_VAR),
        }
    }
}

/// The system's trusted roots (those that `SSL_CERT_FILE` or `SSL_CERT_DIR` name when set, as
/// OpenSSL reads them).
pub(super) fn system_roots() -> Result<RootCertStore, TlsError> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let why = found
            .errors
            .first()
            .map_or_else(|| "none found".to_string(), ToString::to_string);
        return Err(TlsError::NoRoots(why));
    }
    Ok(roots)
}

/// The CAs of the bundle `path`, every one of which must be a certificate rustls can use.
pub(super) fn bundle(var: &'static str, path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(var, path)? {
        roots.add(cert).map_err(|e| TlsError::File {
            var,
            path: path.to_path_buf(),
            problem: FileProblem::Unreadable(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a certificate that is not a CA's: {e}"),
            )),
        })?;
    }
    Ok(roots)
}

/// The certificates of the PEM file `path`, at least one.
pub(super) fn certificates(
    var: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let failed = |problem| TlsError::File {
        var,
        path: path.to_path_buf(),
        problem,
    };
    let text = read(path, false).map_err(failed)?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            failed(FileProblem::Unreadable(io::Error::new(
                io::ErrorKind::InvalidData,
                e.to_string(),
            )))
        })?;
    if certs.is_empty() {
        return Err(failed(FileProblem::NoCertificate));
    }
    Ok(certs)
}

/// The private key of the PEM file `path`, a file of this user's that no one else can read.
pub(super) fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let failed = |problem| TlsError::File {
        var: KEY_VAR,
        path: path.to_path_buf(),
        problem,
    };
    let text = read(path, true).map_err(failed)?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => failed(FileProblem::NoKey),
        e => failed(FileProblem::Unreadable(io::Error::new(
            io::ErrorKind::InvalidData,
            e.to_string(),
        ))),
    })
}

/// The bytes of the regular file `path`; of a private one (this user's, mode 0600 or less)
/// when `private`. The checks are of the file opened, not of its name, so that it cannot be
/// changed between them; it is opened without blocking, so that a FIFO is refused at once.
fn read(path: &Path, private: bool) -> Result<Vec<u8>, FileProblem> {
    let mut file = File::options()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(FileProblem::Unreadable)?;
    let meta = file.metadata().map_err(FileProblem::Unreadable)?;
    if !meta.is_file() {
        return Err(FileProblem::NotAFile);
    }
    if private {
        // SAFETY: geteuid takes no arguments, touches no memory of ours and always succeeds.
        let me = unsafe { nix::libc::geteuid() };
        if meta.uid() != me {
            return Err(FileProblem::OwnedByOther(meta.uid()));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(FileProblem::OpenToOthers(meta.mode()));
        }
    }
    if meta.len() > MAX_PEM {
        return Err(FileProblem::TooLarge(MAX_PEM));
    }
    let mut text = Vec::new();
    (&mut file)
        .take(MAX_PEM + 1)
        .read_to_end(&mut text)
        .map_err(FileProblem::Unreadable)?;
    if text.len() as u64 > MAX_PEM {
        return Err(FileProblem::TooLarge(MAX_PEM));
    }
    Ok(text)
}
