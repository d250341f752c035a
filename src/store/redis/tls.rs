//! TLS to a fleet's Redis (`rediss://`), with rustls: the server's certificate verified against
//! the system's trusted roots or the PEM bundle that `RETRY_REDIS_CA` names, its name checked
//! against the host the URL gives (SNI sent; an IP address is checked against the certificate's
//! IP addresses), a client certificate and key for servers that ask for one (`RETRY_REDIS_CERT`,
//! `RETRY_REDIS_KEY`, as redis-cli's `--cacert`, `--cert` and `--key`), and the handshake within
//! the exchange's deadline. There is no way to skip the verification.
//!
//! Nothing here runs unless a URL asks for TLS: the roots are read by [`client_config`], which
//! a run that names no `rediss://` never calls.
//!
//! Every failure is a [`TlsError`], one line that names the file or the host and says why in
//! plain words; the errors of a [`TlsStream`]'s reads and writes carry one too
//! ([`TlsError::of_io`]), so that a refusal that comes after the handshake (TLS 1.3 servers say
//! only then that they wanted a client certificate) reads the same.

use std::cell::Cell;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use rustls::client::ResolvesClientCert;
use rustls::pki_types::ServerName;
use rustls::{AlertDescription, CertificateError, ClientConfig, ClientConnection};

use super::resp::{Deadline, ExchangeError, is_timeout};

mod error;
mod files;

pub use error::{CA_VAR, CERT_VAR, KEY_VAR};
pub use error::{FileProblem, ServerProblem, TlsError};
pub use files::TlsFiles;
use files::{bundle, certificates, private_key, system_roots};

/// What [`connect`] needs of the files: the rustls configuration, and what the messages say
/// of it. Cheap to clone; made once a process, as reading the system's roots takes a few
/// milliseconds.
#[derive(Clone)]
pub struct TlsConfig {
    config: Arc<ClientConfig>,
    /// The bundle that replaces the system's roots.
    ca: Option<PathBuf>,
    /// Whether a client certificate is offered.
    client_cert: bool,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("ca", &self.ca)
            .field("client_cert", &self.client_cert)
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// The rustls configuration itself.
    pub fn rustls(&self) -> &Arc<ClientConfig> {
        &self.config
    }
}

/// The configuration of the clients of `files`: the system's roots unless `ca` names a
/// bundle; a client certificate when `cert` and `key` are both set (one without the other is
/// an error); a key that others can read, or that is another user's, is refused.
pub fn client_config(files: &TlsFiles) -> Result<TlsConfig, TlsError> {
    let roots = match &files.ca {
        Some(ca) => bundle(CA_VAR, ca)?,
        None => system_roots()?,
    };
    // ring's provider: its key exchanges lack the post-quantum hybrid that aws-lc-rs's offers,
    // for which rustls marks it deprecated; docs/decisions.md says why it is the one chosen.
    // X25519 is offered first, as OpenSSL and browsers offer it: rustls puts P-384 first,
    // whose arithmetic ring does in portable code, and a handshake took 3 times as long.
    #[allow(deprecated)]
    let mut provider = rustls::crypto::ring::default_provider();
    {
        use rustls::crypto::ring::kx_group::{SECP256R1, SECP384R1, X25519};
        provider.kx_groups = vec![X25519, SECP256R1, SECP384R1];
    }
    let provider = Arc::new(provider);
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::NoRoots(e.to_string()))?
        .with_root_certificates(roots);
    let config = match (&files.cert, &files.key) {
        (None, None) => builder.with_no_client_auth(),
        (Some(_), None) => {
            return Err(TlsError::Half {
                given: CERT_VAR,
                missing: KEY_VAR,
            });
        }
        (None, Some(_)) => {
            return Err(TlsError::Half {
                given: KEY_VAR,
                missing: CERT_VAR,
            });
        }
        (Some(cert), Some(key)) => {
            let chain = certificates(CERT_VAR, cert)?;
            let key_der = private_key(key)?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| TlsError::File {
                    var: KEY_VAR,
                    path: key.clone(),
                    problem: FileProblem::KeyMismatch(e.to_string()),
                })?
        }
    };
    Ok(TlsConfig {
        config: Arc::new(config),
        ca: files.ca.clone(),
        client_cert: files.cert.is_some(),
    })
}

/// Records whether the server asked for a client certificate, for the words of a refusal
/// that follows; answers as the configuration's own resolver does.
#[derive(Debug)]
struct Asked {
    inner: Arc<dyn ResolvesClientCert>,
    asked: Arc<AtomicBool>,
}

impl ResolvesClientCert for Asked {
    fn resolve(
        &self,
        root_hint_subjects: &[&[u8]],
        sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.asked.store(true, Ordering::Relaxed);
        self.inner.resolve(root_hint_subjects, sigschemes)
    }

    fn has_certs(&self) -> bool {
        self.inner.has_certs()
    }
}

/// What a failure means, with what is known of the connection.
#[derive(Clone)]
struct Context {
    host: String,
    ca: Option<PathBuf>,
    client_cert: bool,
    asked: Arc<AtomicBool>,
}

impl Context {
    fn fail(&self, problem: ServerProblem) -> TlsError {
        TlsError::Server {
            host: self.host.clone(),
            problem,
        }
    }

    /// The problem rustls's error says.
    fn problem(&self, e: &rustls::Error) -> ServerProblem {
        use rustls::Error as E;
        let asked_in_vain = self.asked.load(Ordering::Relaxed) && !self.client_cert;
        match e {
            E::InvalidCertificate(c) => match c {
                CertificateError::NotValidForName => ServerProblem::OtherName(Vec::new()),
                CertificateError::NotValidForNameContext { presented, .. } => {
                    ServerProblem::OtherName(presented.iter().map(|n| name_of(n)).collect())
                }
                CertificateError::ExpiredContext { not_after, .. } => ServerProblem::Expired(Some(
                    SystemTime::UNIX_EPOCH + Duration::from_secs(not_after.as_secs()),
                )),
                CertificateError::Expired => ServerProblem::Expired(None),
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                    ServerProblem::NotYetValid
                }
                CertificateError::UnknownIssuer => ServerProblem::UnknownIssuer(self.ca.clone()),
                other => ServerProblem::BadCertificate(other.to_string()),
            },
            E::AlertReceived(AlertDescription::CertificateRequired) => {
                ServerProblem::WantsClientCert
            }
            E::AlertReceived(_) if asked_in_vain => ServerProblem::WantsClientCert,
            E::AlertReceived(
                AlertDescription::BadCertificate
                | AlertDescription::UnsupportedCertificate
                | AlertDescription::CertificateRevoked
                | AlertDescription::CertificateExpired
                | AlertDescription::CertificateUnknown
                | AlertDescription::UnknownCA
                | AlertDescription::AccessDenied
                | AlertDescription::DecryptError,
            ) if self.client_cert => ServerProblem::RefusedClientCert,
            E::InvalidMessage(_)
            | E::InappropriateMessage { .. }
            | E::InappropriateHandshakeMessage { .. } => ServerProblem::NotTls,
            other => ServerProblem::Other(other.to_string()),
        }
    }

    /// The problem of an error of the socket during the handshake.
    fn io_problem(&self, e: io::Error, deadline: &Deadline) -> ServerProblem {
        if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
            return self.problem(tls);
        }
        let asked_in_vain = self.asked.load(Ordering::Relaxed) && !self.client_cert;
        if asked_in_vain
            && matches!(
                e.kind(),
                io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::BrokenPipe
            )
        {
            return ServerProblem::WantsClientCert;
        }
        if is_timeout(&e) {
            ServerProblem::Exchange(deadline.timed_out())
        } else {
            ServerProblem::Exchange(ExchangeError::Io(e))
        }
    }

    /// An error of a read or a write after the handshake, in the words of [`TlsError`] when TLS
    /// failed, with its kind kept (a timeout stays one).
    fn stream_error(&self, e: io::Error) -> io::Error {
        let kind = e.kind();
        if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
            return io::Error::new(kind, self.fail(self.problem(tls)));
        }
        if kind == io::ErrorKind::UnexpectedEof {
            if self.asked.load(Ordering::Relaxed) && !self.client_cert {
                return io::Error::new(kind, self.fail(ServerProblem::WantsClientCert));
            }
            // rustls's words for it hold a link to its documentation.
            return io::Error::new(kind, "the server closed the connection");
        }
        e
    }
}

/// A name of a certificate as rustls quotes it: `DnsName("a.example")` as `a.example`.
fn name_of(quoted: &str) -> String {
    match (quoted.find('('), quoted.rfind(')')) {
        (Some(open), Some(close)) if open < close => {
            quoted[open + 1..close].trim_matches('"').to_string()
        }
        _ => quoted.to_string(),
    }
}

/// A TLS connection to a Redis server over TCP, past its handshake.
///
/// Its timeouts bound each call, as a socket's bound each of its calls: a read or a write
/// that needs several reads or writes of TLS records beneath waits for them all only as long
/// as the timeout set, so that a server sending a reply a byte at a time cannot stretch one
/// read past it.
pub struct TlsStream {
    conn: ClientConnection,
    sock: TcpStream,
    read_timeout: Cell<Option<Duration>>,
    write_timeout: Cell<Option<Duration>>,
    context: Context,
}

impl fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsStream")
            .field("host", &self.context.host)
            .finish_non_exhaustive()
    }
}

/// What is left of `limit` since `start`, or the failure of a timeout.
fn remaining(limit: Option<Duration>, start: Instant) -> io::Result<Option<Duration>> {
    match limit {
        None => Ok(None),
        Some(limit) => limit
            .checked_sub(start.elapsed())
            .filter(|left| !left.is_zero())
            .map(Some)
            .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "timed out")),
    }
}

impl TlsStream {
    /// How long one read may wait, all the reads of the socket it needs together.
    pub fn set_read_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(dur)?;
        self.read_timeout.set(dur);
        Ok(())
    }

    /// How long one write may wait, all the writes to the socket it needs together.
    pub fn set_write_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        self.sock.set_write_timeout(dur)?;
        self.write_timeout.set(dur);
        Ok(())
    }

    /// The socket beneath.
    pub fn get_ref(&self) -> &TcpStream {
        &self.sock
    }

    /// Sends what TLS has to send, within the write timeout from `start`.
    fn send_records(&mut self, start: Instant) -> io::Result<()> {
        while self.conn.wants_write() {
            self.sock
                .set_write_timeout(remaining(self.write_timeout.get(), start)?)?;
            match self.conn.write_tls(&mut self.sock) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl crate::store::redis::conn::Wrapped for TlsStream {
    fn set_read_timeout(&self, left: Option<Duration>) -> io::Result<()> {
        TlsStream::set_read_timeout(self, left)
    }

    fn set_write_timeout(&self, left: Option<Duration>) -> io::Result<()> {
        TlsStream::set_write_timeout(self, left)
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let start = Instant::now();
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(self.context.stream_error(e)),
            }
            self.send_records(start)?;
            self.sock
                .set_read_timeout(remaining(self.read_timeout.get(), start)?)?;
            let got = match self.conn.read_tls(&mut self.sock) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.context.stream_error(e)),
            };
            if let Err(e) = self.conn.process_new_packets() {
                // The alert that says why, sent if the socket takes it in time.
                let _ = self.send_records(start);
                let e = io::Error::new(io::ErrorKind::InvalidData, e);
                return Err(self.context.stream_error(e));
            }
            if got == 0 {
                // The connection is closed: what came before it, or why it ended.
                return match self.conn.reader().read(buf) {
                    Ok(n) => Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(self
                        .context
                        .stream_error(io::ErrorKind::UnexpectedEof.into())),
                    Err(e) => Err(self.context.stream_error(e)),
                };
            }
        }
    }
}

impl Write for TlsStream {
    /// Takes what TLS's buffer takes of `buf` and sends it. A write that fails may have taken
    /// some of it: the connection is then of no more use.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let start = Instant::now();
        let taken = self.conn.writer().write(buf)?;
        self.send_records(start)
            .map_err(|e| self.context.stream_error(e))?;
        Ok(taken)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_records(Instant::now())
            .map_err(|e| self.context.stream_error(e))
    }
}

/// TLS over `tcp`, to the server that `host` names (the URL's host: a name is sent as SNI and
/// checked against the certificate's names, an IP address against its addresses), the whole
/// handshake before `deadline`: every read and write waits only for what is left of it.
///
/// A server that wants a client certificate and got none says so after the handshake under
/// TLS 1.3: then the first read of the stream fails with that [`TlsError`].
pub fn connect(
    mut tcp: TcpStream,
    host: &str,
    config: &TlsConfig,
    deadline: &Deadline,
) -> Result<TlsStream, TlsError> {
    let asked = Arc::new(AtomicBool::new(false));
    let context = Context {
        host: host.to_string(),
        ca: config.ca.clone(),
        client_cert: config.client_cert,
        asked: asked.clone(),
    };
    let name =
        ServerName::try_from(host.to_string()).map_err(|_| context.fail(ServerProblem::BadName))?;
    // The configuration of this connection only: the same, with a resolver that notes whether
    // the server asked for a client certificate.
    let mut own = ClientConfig::clone(&config.config);
    own.client_auth_cert_resolver = Arc::new(Asked {
        inner: own.client_auth_cert_resolver.clone(),
        asked,
    });
    let mut conn = ClientConnection::new(Arc::new(own), name)
        .map_err(|e| context.fail(ServerProblem::Other(e.to_string())))?;
    let io_failed = |context: &Context, e: io::Error| context.fail(context.io_problem(e, deadline));
    let time_left = |context: &Context| {
        deadline
            .left()
            .map_err(|e| context.fail(ServerProblem::Exchange(e)))
    };
    while conn.is_handshaking() || conn.wants_write() {
        if conn.wants_write() {
            tcp.set_write_timeout(Some(time_left(&context)?))
                .map_err(|e| io_failed(&context, e))?;
            match conn.write_tls(&mut tcp) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_failed(&context, e)),
            }
            continue;
        }
        tcp.set_read_timeout(Some(time_left(&context)?))
            .map_err(|e| io_failed(&context, e))?;
        match conn.read_tls(&mut tcp) {
            Ok(0) => {
                return Err(io_failed(
                    &context,
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    ),
                ));
            }
            Ok(_) => {
                if let Err(e) = conn.process_new_packets() {
                    // The alert that says why, sent if the socket takes it at once.
                    let _ = tcp.set_write_timeout(Some(Duration::from_millis(10)));
                    let _ = conn.write_tls(&mut tcp);
                    return Err(context.fail(context.problem(&e)));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_failed(&context, e)),
        }
    }
    Ok(TlsStream {
        conn,
        sock: tcp,
        read_timeout: Cell::new(None),
        write_timeout: Cell::new(None),
        context,
    })
}

/// The certificates and the TLS `redis-server` of the tests, shared with the end-to-end tests.
#[cfg(test)]
#[allow(dead_code)]
#[path = "../../../tests/common/tls.rs"]
mod servers;

#[cfg(test)]
mod tests {
    use super::servers::{Pki, ServerCert, TlsServer};
    use super::*;
    use std::ffi::OsString;
    use std::net::TcpListener;

    /// Long enough for a handshake on a loaded machine.
    const WITHIN: Duration = Duration::from_secs(10);

    fn files(pki: &Pki, client: Option<(PathBuf, PathBuf)>) -> TlsFiles {
        let (cert, key) = client.unzip();
        TlsFiles {
            ca: Some(pki.ca()),
            cert,
            key,
        }
    }

    /// TLS with the server on 127.0.0.1:`port`, to `host`.
    fn handshake(port: u16, host: &str, files: &TlsFiles) -> Result<TlsStream, TlsError> {
        let config = client_config(files).expect("the test's files make a configuration");
        let tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        connect(tcp, host, &config, &Deadline::within(WITHIN))
    }

    /// PING and its answer, over `stream`.
    fn ping(stream: &mut TlsStream) -> io::Result<String> {
        stream.set_read_timeout(Some(WITHIN))?;
        stream.set_write_timeout(Some(WITHIN))?;
        stream.write_all(b"*1\r\n$4\r\nPING\r\n")?;
        let mut reply = Vec::new();
        let mut byte = [0u8; 1];
        while !reply.ends_with(b"\r\n") {
            match stream.read(&mut byte)? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                _ => reply.push(byte[0]),
            }
        }
        Ok(String::from_utf8_lossy(&reply).into_owned())
    }

    /// The one line of a refusal, from the handshake or from the first exchange after it.
    fn refusal(port: u16, host: &str, files: &TlsFiles) -> String {
        let line = match handshake(port, host, files) {
            Err(e) => e.to_string(),
            Ok(mut stream) => match ping(&mut stream) {
                Ok(reply) => panic!("the server answered {reply:?} where TLS should fail"),
                Err(e) => {
                    assert!(TlsError::of_io(&e).is_some(), "not a TLS error: {e:?}");
                    e.to_string()
                }
            },
        };
        assert!(!line.contains('\n'), "{line}");
        line
    }

    #[test]
    fn a_verified_server_answers_ping_by_address_and_by_name() {
        let Some(server) = TlsServer::start("tls_ping", ServerCert::Good, false) else {
            return;
        };
        let pki = Pki::get("tls_ping").unwrap();
        for host in ["127.0.0.1", "localhost"] {
            let mut stream = handshake(server.port, host, &files(pki, None))
                .unwrap_or_else(|e| panic!("{host}: {e}"));
            assert_eq!(ping(&mut stream).unwrap(), "+PONG\r\n", "{host}");
        }
    }

    #[test]
    fn a_certificate_for_another_name_is_refused() {
        let Some(server) = TlsServer::start("tls_other_name", ServerCert::OtherName, false) else {
            return;
        };
        let pki = Pki::get("tls_other_name").unwrap();
        let line = refusal(server.port, "127.0.0.1", &files(pki, None));
        assert_eq!(
            line,
            "TLS with 127.0.0.1: the server's certificate is for another name \
             (other.example), not 127.0.0.1"
        );
        // The certificate's own name, asked for at an address that is not its, still connects
        // nowhere else: the name is checked, not where the connection goes.
        let Ok(mut stream) = handshake(server.port, "other.example", &files(pki, None)) else {
            panic!("other.example is the certificate's name");
        };
        assert_eq!(ping(&mut stream).unwrap(), "+PONG\r\n");
    }

    #[test]
    fn an_expired_certificate_is_refused() {
        let Some(server) = TlsServer::start("tls_expired", ServerCert::Expired, false) else {
            return;
        };
        let pki = Pki::get("tls_expired").unwrap();
        let line = refusal(server.port, "localhost", &files(pki, None));
        assert_eq!(
            line,
            "TLS with localhost: the server's certificate expired at 2020-01-02T00:00:00Z"
        );
    }

    #[test]
    fn an_unknown_issuer_is_refused_by_the_bundle_and_by_the_system() {
        let Some(server) = TlsServer::start("tls_unknown", ServerCert::UnknownIssuer, false) else {
            return;
        };
        let pki = Pki::get("tls_unknown").unwrap();
        let line = refusal(server.port, "127.0.0.1", &files(pki, None));
        assert_eq!(
            line,
            format!(
                "TLS with 127.0.0.1: the server's certificate was issued by an unknown \
                 authority, none of those in RETRY_REDIS_CA {}",
                pki.ca().display()
            )
        );
        // The tests' own CA is in no system's roots either.
        let Ok(config) = client_config(&TlsFiles::default()) else {
            return;
        };
        let tcp = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        let e = connect(tcp, "127.0.0.1", &config, &Deadline::within(WITHIN)).unwrap_err();
        assert!(
            e.to_string().contains("none of the system's trusted roots"),
            "{e}"
        );
    }

    #[test]
    fn a_server_that_wants_a_client_certificate_gets_it_or_says_so() {
        let Some(server) = TlsServer::start("tls_client_cert", ServerCert::Good, true) else {
            return;
        };
        let pki = Pki::get("tls_client_cert").unwrap();
        let line = refusal(server.port, "127.0.0.1", &files(pki, None));
        assert_eq!(
            line,
            "TLS with 127.0.0.1: the server wants a client certificate: name one in \
             RETRY_REDIS_CERT and its key in RETRY_REDIS_KEY"
        );
        let line = refusal(
            server.port,
            "127.0.0.1",
            &files(pki, Some(pki.rogue_client())),
        );
        assert_eq!(
            line,
            "TLS with 127.0.0.1: the server refused the client certificate of RETRY_REDIS_CERT"
        );
        let mut stream = handshake(server.port, "127.0.0.1", &files(pki, Some(pki.client())))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ping(&mut stream).unwrap(), "+PONG\r\n");
    }

    #[test]
    fn a_client_key_that_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let Some(pki) = Pki::get("tls_key_mode") else {
            return;
        };
        let (cert, key) = pki.client();
        let open = pki.path("client-open.key");
        std::fs::copy(&key, &open).unwrap();
        for mode in [0o644, 0o640, 0o604, 0o660] {
            std::fs::set_permissions(&open, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = client_config(&files(pki, Some((cert.clone(), open.clone())))).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "RETRY_REDIS_KEY {}: other users can read it (mode {mode:04o}): a private \
                     key must be readable by its owner only (chmod 600), as ssh asks of one",
                    open.display()
                )
            );
        }
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o400)).unwrap();
        client_config(&files(pki, Some((cert.clone(), open.clone()))))
            .expect("a key of mode 0400 is private");
        // Another user's key, which root could read, is refused too.
        // SAFETY: geteuid takes no arguments, touches no memory of ours and always succeeds.
        if unsafe { nix::libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&open, Some(65534), None).unwrap();
            let e = client_config(&files(pki, Some((cert, open.clone())))).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "RETRY_REDIS_KEY {}: belongs to uid 65534, not to this user: a private key \
                     must be this user's own, as ssh asks of one",
                    open.display()
                )
            );
        }
    }

    #[test]
    fn files_that_cannot_serve_are_named_with_the_reason() {
        let Some(pki) = Pki::get("tls_files") else {
            return;
        };
        let (cert, key) = pki.client();
        let missing = pki.path("no-such.pem");
        let cases = [
            (
                TlsFiles {
                    ca: Some(missing.clone()),
                    ..TlsFiles::default()
                },
                format!(
                    "RETRY_REDIS_CA {}: cannot be read: No such file or directory (os error 2)",
                    missing.display()
                ),
            ),
            (
                TlsFiles {
                    ca: Some(pki.dir.clone()),
                    ..TlsFiles::default()
                },
                format!(
                    "RETRY_REDIS_CA {}: is not a regular file",
                    pki.dir.display()
                ),
            ),
            (
                TlsFiles {
                    ca: Some(pki.path("server.ext")),
                    ..TlsFiles::default()
                },
                format!(
                    "RETRY_REDIS_CA {}: holds no certificate in PEM",
                    pki.path("server.ext").display()
                ),
            ),
            (
                TlsFiles {
                    ca: Some(pki.ca()),
                    cert: Some(cert.clone()),
                    key: None,
                },
                "RETRY_REDIS_CERT is set without RETRY_REDIS_KEY: a client certificate needs \
                 both"
                    .to_string(),
            ),
            (
                TlsFiles {
                    ca: Some(pki.ca()),
                    cert: None,
                    key: Some(key.clone()),
                },
                "RETRY_REDIS_KEY is set without RETRY_REDIS_CERT: a client certificate needs \
                 both"
                    .to_string(),
            ),
            (
                TlsFiles {
                    ca: Some(pki.ca()),
                    cert: Some(cert.clone()),
                    key: Some(pki.path("server.key")),
                },
                format!(
                    "RETRY_REDIS_KEY {}: cannot sign for the certificate of RETRY_REDIS_CERT: ",
                    pki.path("server.key").display()
                ),
            ),
        ];
        for (files, said) in cases {
            let e = client_config(&files).unwrap_err().to_string();
            assert!(e.starts_with(&said), "{files:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn a_reply_sent_a_byte_at_a_time_cannot_stretch_a_read_past_its_timeout() {
        let Some(pki) = Pki::get("tls_dribble") else {
            return;
        };
        // A TLS server of the test's own (rustls's), which answers PING with its record sent a
        // byte every 100 ms: 3 s for the whole of it.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server_config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                certificates(CERT_VAR, &pki.path("server.pem")).unwrap(),
                private_key(&pki.path("server.key")).unwrap(),
            )
            .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut tcp, _) = listener.accept().unwrap();
            let mut conn = rustls::ServerConnection::new(Arc::new(server_config)).unwrap();
            let mut got = Vec::new();
            while !got.ends_with(b"PING\r\n") {
                if conn.complete_io(&mut tcp).is_err() {
                    return;
                }
                let mut chunk = [0u8; 64];
                if let Ok(n) = conn.reader().read(&mut chunk) {
                    got.extend_from_slice(&chunk[..n]);
                }
            }
            conn.writer().write_all(b"+PONG\r\n").unwrap();
            let mut records = Vec::new();
            while conn.wants_write() {
                conn.write_tls(&mut records).unwrap();
            }
            for byte in records {
                if tcp.write_all(&[byte]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let config = client_config(&files(pki, None)).unwrap();
        let mut stream = connect(tcp, "127.0.0.1", &config, &Deadline::within(WITHIN)).unwrap();
        stream.set_write_timeout(Some(WITHIN)).unwrap();
        stream.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(400)))
            .unwrap();
        let start = Instant::now();
        let mut reply = [0u8; 64];
        let read = stream.read(&mut reply);
        let took = start.elapsed();
        drop(stream);
        server.join().unwrap();
        let e = read.expect_err("the reply takes 3 s to come");
        assert!(is_timeout(&e), "{e:?}");
        assert!(took >= Duration::from_millis(390), "{took:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");
    }

    #[test]
    fn x25519_is_offered_first() {
        let Some(pki) = Pki::get("tls_x25519") else {
            return;
        };
        let config = client_config(&files(pki, None)).unwrap();
        let groups: Vec<_> = config
            .rustls()
            .crypto_provider()
            .kx_groups
            .iter()
            .map(|g| g.name())
            .collect();
        assert_eq!(
            groups,
            [
                rustls::NamedGroup::X25519,
                rustls::NamedGroup::secp256r1,
                rustls::NamedGroup::secp384r1
            ]
        );
    }

    #[test]
    fn the_files_are_read_from_the_environment_s_variables() {
        let vars = |name: &str| match name {
            "RETRY_REDIS_CA" => Some(OsString::from("/etc/ca.pem")),
            "RETRY_REDIS_CERT" => Some(OsString::new()),
            "RETRY_REDIS_KEY" => Some(OsString::from("k.pem")),
            _ => None,
        };
        assert_eq!(
            TlsFiles::from_vars(vars),
            TlsFiles {
                ca: Some(PathBuf::from("/etc/ca.pem")),
                cert: None,
                key: Some(PathBuf::from("k.pem")),
            }
        );
    }

    #[test]
    fn a_plain_server_is_never_spoken_to_without_tls() {
        let Some(pki) = Pki::get("tls_plain") else {
            return;
        };
        // A server that answers whatever comes as a plain Redis does: with an error line.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let answer = std::thread::spawn(move || {
            let (mut peer, _) = listener.accept().unwrap();
            let mut hello = [0u8; 512];
            let _ = peer.read(&mut hello);
            let _ = peer.write_all(b"-ERR unknown command '\x16\x03\x01'\r\n");
            // Whatever TLS sends next (an alert) is not a command.
            let mut rest = Vec::new();
            let _ = peer.set_read_timeout(Some(WITHIN));
            let _ = peer.read_to_end(&mut rest);
            rest
        });
        let e = handshake(port, "127.0.0.1", &files(pki, None)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "TLS with 127.0.0.1: the server does not answer in TLS (is this port a plain \
             redis:// one?)"
        );
        drop(e);
        let after = answer.join().unwrap();
        assert!(!after.windows(4).any(|w| w == b"PING"), "{after:?}");
    }

    #[test]
    fn a_server_silent_at_the_handshake_fails_at_the_deadline() {
        let Some(pki) = Pki::get("tls_silent") else {
            return;
        };
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let config = client_config(&files(pki, None)).unwrap();
        let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let start = Instant::now();
        let e = connect(
            tcp,
            "127.0.0.1",
            &config,
            &Deadline::within(Duration::from_millis(300)),
        )
        .unwrap_err();
        let took = start.elapsed();
        drop(listener);
        assert_eq!(
            e.to_string(),
            "TLS with 127.0.0.1: the handshake failed: no answer within 300 ms"
        );
        assert!(took >= Duration::from_millis(290), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
    }
}
