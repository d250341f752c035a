//! Certificates made with `openssl`, and a `redis-server` that speaks only TLS on 127.0.0.1, for
//! the tests of `rediss://`. Without `openssl`, or without a `redis-server` built with TLS, a
//! test says so loudly on stderr and passes, unless RETRY_REQUIRE_REDIS=1 (as CI sets it) makes
//! it fail.
//!
//! This file uses nothing of the tests' other helpers, so that the library's own tests (of
//! `store/redis/tls.rs`) include it too.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The certificates of the tests, made once a test program, in a directory of its own (0700).
pub struct Pki {
    pub dir: PathBuf,
}

/// Which certificate a server shows, each with its key beside it (`NAME.pem`, `NAME.key`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerCert {
    /// Issued by the tests' CA (`ca.pem`) for 127.0.0.1 and localhost.
    Good,
    /// The same names and issuer, expired since 2 January 2020.
    Expired,
    /// Issued by the tests' CA for `other.example` only.
    OtherName,
    /// For 127.0.0.1 and localhost, issued by a CA the client does not know.
    UnknownIssuer,
}

impl ServerCert {
    fn name(self) -> &'static str {
        match self {
            ServerCert::Good => "server",
            ServerCert::Expired => "expired",
            ServerCert::OtherName => "other",
            ServerCert::UnknownIssuer => "unknown",
        }
    }
}

impl Pki {
    /// The tests' CA bundle, which the good, expired and other-name certificates chain to.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A client certificate and its key, issued by the tests' CA.
    pub fn client(&self) -> (PathBuf, PathBuf) {
        (self.dir.join("client.pem"), self.dir.join("client.key"))
    }

    /// A client certificate and its key, issued by the CA the server does not know.
    pub fn rogue_client(&self) -> (PathBuf, PathBuf) {
        (
            self.dir.join("rogue-client.pem"),
            self.dir.join("rogue-client.key"),
        )
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// The certificates, made on first use; `None` after saying loudly that `test` is skipped
    /// when `openssl` cannot make them.
    pub fn get(test: &str) -> Option<&'static Pki> {
        static PKI: OnceLock<Result<Pki, String>> = OnceLock::new();
        match PKI.get_or_init(make) {
            Ok(pki) => Some(pki),
            Err(why) => {
                skip(
                    test,
                    &format!("openssl cannot make the certificates: {why}"),
                );
                None
            }
        }
    }
}

/// Says on the real stderr that `test` did not run, or fails under RETRY_REQUIRE_REDIS=1 or
/// RETRY_REQUIRE_PACKAGES=1.
fn skip(test: &str, why: &str) {
    let required = |name| std::env::var_os(name).is_some_and(|v| v == "1");
    if required("RETRY_REQUIRE_REDIS") || required("RETRY_REQUIRE_PACKAGES") {
        panic!("{test}: {why} (RETRY_REQUIRE_REDIS=1)");
    }
    // Written to the real stderr: the test harness captures `eprintln!` of passing tests.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: {test} did not run: {why}; install openssl and redis-server (built with TLS), \
         or set RETRY_REQUIRE_REDIS=1 to make this a failure"
    );
}

fn openssl(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run openssl: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "openssl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A new P-256 key in `NAME.key` and a request for `CN`, in `NAME.csr`.
fn request(dir: &Path, name: &str, cn: &str) -> Result<(), String> {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            &format!("/CN={cn}"),
        ],
    )
}

/// `NAME.pem`, from `NAME.csr`, signed by the CA `ca` for `days` (negative: expired), with the
/// extensions of the file `ext`.
fn sign(dir: &Path, name: &str, ca: &str, days: &str, ext: &str) -> Result<(), String> {
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-set_serial",
            &format!("{}", 1000 + name.len() * 7 + days.len()),
            "-days",
            days,
            "-out",
            &format!("{name}.pem"),
            "-extfile",
            ext,
        ],
    )
}

fn make() -> Result<Pki, String> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    // Under the build's own directory for temporary files where cargo names one (the
    // integration tests), else the system's.
    let base = option_env!("CARGO_TARGET_TMPDIR").map_or_else(std::env::temp_dir, PathBuf::from);
    // Those of test programs that have ended are removed: they hold nothing anyone needs.
    if let Ok(entries) = std::fs::read_dir(&base) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.strip_prefix("retry-tls-certs-"));
            if pid.is_some_and(|pid| !Path::new("/proc").join(pid).exists()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let dir = base.join(format!("retry-tls-certs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).map_err(|e| format!("{name}: {e}"))
    };
    write(
        "server.ext",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    )?;
    write(
        "other.ext",
        "subjectAltName=DNS:other.example\nextendedKeyUsage=serverAuth\n",
    )?;
    write("client.ext", "extendedKeyUsage=clientAuth\n")?;
    for ca in ["ca", "rogue-ca"] {
        openssl(
            &dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                &format!("{ca}.key"),
                "-out",
                &format!("{ca}.pem"),
                "-days",
                "2",
                "-subj",
                &format!("/CN=retry test {ca}"),
            ],
        )?;
    }
    for (name, cn, ca, days, ext) in [
        ("server", "localhost", "ca", "2", "server.ext"),
        ("other", "other.example", "ca", "2", "other.ext"),
        ("unknown", "localhost", "rogue-ca", "2", "server.ext"),
        ("client", "retry client", "ca", "2", "client.ext"),
        (
            "rogue-client",
            "retry client",
            "rogue-ca",
            "2",
            "client.ext",
        ),
    ] {
        request(&dir, name, cn)?;
        sign(&dir, name, ca, days, ext)?;
    }
    // Expired on 2 January 2020, after a day of validity: `openssl ca`, as `openssl x509`
    // (before OpenSSL 3.4) sets no start date but now.
    write(
        "ca.cnf",
        "[ca]\ndefault_ca = test\n[test]\ndatabase = index.txt\nnew_certs_dir = .\n\
         serial = serial\ndefault_md = sha256\npolicy = any\nunique_subject = no\n\
         [any]\ncommonName = supplied\n",
    )?;
    write("index.txt", "")?;
    write("serial", "2000\n")?;
    request(&dir, "expired", "localhost")?;
    openssl(
        &dir,
        &[
            "ca",
            "-batch",
            "-config",
            "ca.cnf",
            "-cert",
            "ca.pem",
            "-keyfile",
            "ca.key",
            "-startdate",
            "20200101000000Z",
            "-enddate",
            "20200102000000Z",
            "-extfile",
            "server.ext",
            "-notext",
            "-in",
            "expired.csr",
            "-out",
            "expired.pem",
        ],
    )?;
    // Keys as a careful user keeps them: readable by their owner only.
    for entry in std::fs::read_dir(&dir).map_err(|e| e.to_string())? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.extension().is_some_and(|e| e == "key") {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(Pki { dir })
}

/// A `redis-server` that listens with TLS only, on 127.0.0.1, killed when dropped.
pub struct TlsServer {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TlsServer {
    /// A server showing `cert`, asking clients for a certificate of the tests' CA when
    /// `client_certs`; `None` after saying loudly that `test` is skipped when there is no
    /// `openssl` or no `redis-server` built with TLS.
    pub fn start(test: &str, cert: ServerCert, client_certs: bool) -> Option<TlsServer> {
        TlsServer::start_with(test, cert, client_certs, &[])
    }

    /// [`TlsServer::start`], with these arguments more (ACL users, say).
    pub fn start_with(
        test: &str,
        cert: ServerCert,
        client_certs: bool,
        extra: &[&str],
    ) -> Option<TlsServer> {
        let pki = Pki::get(test)?;
        let mut why = String::new();
        // A free port may be taken between asking for it and the server binding it: try again.
        for _ in 0..3 {
            match TlsServer::try_start(test, pki, cert, client_certs, extra) {
                Ok(server) => return Some(server),
                Err(e) => why = e,
            }
        }
        skip(
            test,
            &format!("redis-server with TLS could not be started: {why}"),
        );
        None
    }

    fn try_start(
        test: &str,
        pki: &Pki,
        cert: ServerCert,
        client_certs: bool,
        extra: &[&str],
    ) -> Result<TlsServer, String> {
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
            listener.local_addr().map_err(|e| e.to_string())?.port()
        };
        let log = pki.dir.join(format!("redis-{test}-{port}.log"));
        let (pem, key) = (
            pki.path(&format!("{}.pem", cert.name())),
            pki.path(&format!("{}.key", cert.name())),
        );
        let mut command = Command::new("redis-server");
        // The server gets none of the descriptors the test process inherited (a lock that
        // `flock(1)` holds for whoever started cargo, say): each is marked close-on-exec.
        // SAFETY: the closure makes one system call, async-signal-safe, and touches no memory.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                nix::libc::syscall(
                    nix::libc::SYS_close_range,
                    3u32,
                    u32::MAX,
                    nix::libc::CLOSE_RANGE_CLOEXEC,
                );
                Ok(())
            });
        }
        command
            .args(["--port", "0", "--bind", "127.0.0.1", "--tls-port"])
            .arg(port.to_string())
            .arg("--tls-cert-file")
            .arg(&pem)
            .arg("--tls-key-file")
            .arg(&key)
            .arg("--tls-ca-cert-file")
            .arg(pki.ca())
            .args([
                "--tls-auth-clients",
                if client_certs { "yes" } else { "no" },
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(extra)
            .current_dir(&pki.dir)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).map_err(|e| e.to_string())?)
            .stderr(Stdio::null());
        let child = command
            .spawn()
            .map_err(|e| format!("cannot run redis-server: {e}"))?;
        let mut server = TlsServer { child, port, log };
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Ok(Some(status)) = server.child.try_wait() {
                let log = std::fs::read_to_string(&server.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(3).collect();
                return Err(format!(
                    "redis-server on TLS port {port} ended ({status}): {}",
                    tail.join(" | ")
                ));
            }
            // Another test's server may hold the port while this one fails to bind it: only
            // this server's own log says it listens.
            let ready = std::fs::read_to_string(&server.log)
                .is_ok_and(|log| log.to_lowercase().contains("ready to accept connections"));
            if ready && TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(format!("redis-server on TLS port {port} did not listen"))
    }
}
