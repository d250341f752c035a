//! The local quota store (docs/herd.md#shared-retry-quota) through its library interface: where it
//! lives, what it refuses, how it repairs a damaged file, and that concurrent runs, a killed holder
//! of the lock and a stuck one neither lose updates nor stall anybody.

use crate::common;

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use common::{LockHolder, euid, other_user, quota_params};
use retry::policy::quota::{Bucket, QuotaParams, RECORD_LEN};
use retry::store::file::{LOCK_WAIT, LocalStore, Problem, StoreError, store_dir};
use retry::store::quota::{BucketStore, Note, Unanswered, Update, unix_ms};

const T0: u64 = 1_764_480_000_000;

/// An environment with only these variables set.
fn env(vars: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> + use<> {
    let vars: Vec<(String, OsString)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_os_str().to_owned()))
        .collect();
    move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

/// The quota `name` in a store under a fresh XDG_RUNTIME_DIR.
fn store(test: &str, name: &str, p: QuotaParams) -> (PathBuf, LocalStore) {
    let runtime = common::temp_dir(test);
    let store = LocalStore::new(name, p, env(&[("XDG_RUNTIME_DIR", &runtime)])).unwrap();
    (runtime, store)
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn the_store_lives_in_the_runtime_directory_when_there_is_one() {
    let runtime = common::temp_dir("where-xdg");
    let tmp = common::temp_dir("where-tmp");
    let uid = euid();
    let both = env(&[("XDG_RUNTIME_DIR", &runtime), ("TMPDIR", &tmp)]);
    assert_eq!(store_dir(both, uid), runtime.join("retry"));
    assert_eq!(
        store_dir(env(&[("TMPDIR", &tmp)]), uid),
        tmp.join(format!("retry-{uid}"))
    );
    assert_eq!(
        store_dir(env(&[]), uid),
        PathBuf::from(format!("/tmp/retry-{uid}"))
    );
}

#[test]
fn an_unusable_runtime_directory_or_tmpdir_is_passed_over() {
    let tmp = common::temp_dir("where-unusable");
    let uid = euid();
    let per_user = tmp.join(format!("retry-{uid}"));
    // Relative, missing, not a directory, or owned by somebody else.
    let relative = env(&[("XDG_RUNTIME_DIR", Path::new("run")), ("TMPDIR", &tmp)]);
    assert_eq!(store_dir(relative, uid), per_user);
    let missing = tmp.join("missing");
    let gone = env(&[("XDG_RUNTIME_DIR", &missing), ("TMPDIR", &tmp)]);
    assert_eq!(store_dir(gone, uid), per_user);
    let file = tmp.join("file");
    fs::write(&file, "").unwrap();
    let not_dir = env(&[("XDG_RUNTIME_DIR", &file), ("TMPDIR", &tmp)]);
    assert_eq!(store_dir(not_dir, uid), per_user);
    let not_ours = env(&[("XDG_RUNTIME_DIR", &tmp), ("TMPDIR", &tmp)]);
    assert_eq!(
        store_dir(not_ours, uid + 1),
        tmp.join(format!("retry-{}", uid + 1))
    );
    let bad_tmp = env(&[("TMPDIR", &missing)]);
    assert_eq!(
        store_dir(bad_tmp, uid),
        PathBuf::from(format!("/tmp/retry-{uid}"))
    );
}

#[test]
fn the_directory_is_created_0700_and_the_file_0600() {
    let (runtime, q) = store("modes", "deploys", QuotaParams::default());
    assert_eq!(q.dir(), runtime.join("retry"));
    assert_eq!(q.path(), runtime.join("retry/deploys.quota"));
    let update = q.deposit(T0).unwrap();
    assert_eq!(mode(q.dir()), 0o700);
    assert_eq!(mode(&q.path()), 0o600);
    assert_eq!(fs::read(q.path()).unwrap().len(), RECORD_LEN);
    assert!(update.granted);
    assert_eq!(update.tokens, 10.0);
    assert_eq!(update.note, None);
}

#[test]
fn a_name_that_cannot_be_a_file_name_is_refused() {
    let runtime = common::temp_dir("name");
    for bad in ["../x", ".q", "", "a/b"] {
        let e = LocalStore::new(
            bad,
            QuotaParams::default(),
            env(&[("XDG_RUNTIME_DIR", &runtime)]),
        )
        .unwrap_err();
        assert!(matches!(e, StoreError::Name(_)), "{bad}: {e}");
    }
}

#[test]
fn a_directory_that_others_may_enter_is_refused() {
    for m in [0o755, 0o710, 0o701, 0o770] {
        let (_runtime, q) = store("open-dir", "q", QuotaParams::default());
        fs::create_dir(q.dir()).unwrap();
        fs::set_permissions(q.dir(), fs::Permissions::from_mode(m)).unwrap();
        let e = q.take(T0).unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::Unsafe {
                    problem: Problem::Mode { mode },
                    ..
                } if mode == m
            ),
            "{m:o}: {e}"
        );
        let message = e.to_string();
        assert!(message.contains(&format!("{m:04o}")), "{message}");
        assert!(!message.contains('\n'));
        assert!(
            !q.path().exists(),
            "nothing is created in a refused directory"
        );
        assert!(q.peek(T0).is_err());
    }
}

#[test]
fn a_symbolic_link_in_place_of_the_directory_is_refused() {
    let (runtime, q) = store("symlink-dir", "q", QuotaParams::default());
    let elsewhere = runtime.join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o700)).unwrap();
    symlink(&elsewhere, q.dir()).unwrap();
    let e = q.deposit(T0).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::Unsafe {
                problem: Problem::Symlink,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("symbolic link"), "{e}");
    assert!(!elsewhere.join("q.quota").exists());
}

#[test]
fn a_file_in_place_of_the_directory_is_refused() {
    let (_runtime, q) = store("file-dir", "q", QuotaParams::default());
    fs::write(q.dir(), "").unwrap();
    let e = q.deposit(T0).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::Unsafe {
                problem: Problem::NotDirectory,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_symbolic_link_in_place_of_the_quota_file_is_refused() {
    let (runtime, q) = store("symlink-file", "q", QuotaParams::default());
    q.deposit(T0).unwrap();
    fs::remove_file(q.path()).unwrap();
    let target = runtime.join("target");
    fs::write(&target, "keep").unwrap();
    symlink(&target, q.path()).unwrap();
    let e = q.take(T0).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::Unsafe {
                problem: Problem::Symlink,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "keep");
}

/// `op` again while the store is busy, for up to 5 s: a child that another test's thread has
/// just forked holds a copy of the quota file's descriptor, and so its lock, until its exec.
fn patient<T>(op: impl Fn() -> Result<T, StoreError>) -> T {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        match op() {
            Err(StoreError::Busy { .. }) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other.unwrap(),
        }
    }
}

#[test]
fn first_tries_deposit_and_retries_take_from_one_shared_file() {
    let runtime = common::temp_dir("shared");
    let p = quota_params(0.25, 0.0, 3.0);
    let vars = [("XDG_RUNTIME_DIR", runtime.as_path())];
    let a = LocalStore::new("q", p, env(&vars)).unwrap();
    let b = LocalStore::new("q", p, env(&vars)).unwrap();
    assert!(patient(|| a.take(T0)).granted);
    assert!(patient(|| b.take(T0)).granted);
    let last = patient(|| a.take(T0));
    assert!(last.granted);
    assert_eq!(last.tokens, 0.0);
    assert!(!patient(|| b.take(T0)).granted);
    for _ in 0..4 {
        assert!(patient(|| b.deposit(T0)).granted);
    }
    assert_eq!(patient(|| a.peek(T0)).tokens, 1.0);
    assert!(patient(|| a.take(T0)).granted);
    let refused = patient(|| b.take(T0));
    assert!(!refused.granted);
    assert_eq!(refused.tokens, 0.0);
    // Another quota is another file.
    let other = LocalStore::new("other", p, env(&vars)).unwrap();
    assert!(patient(|| other.take(T0)).granted);
}

#[test]
fn the_floor_rate_refills_between_runs() {
    let (_runtime, q) = store("floor", "q", quota_params(0.0, 2.0, 1.0));
    assert!(q.take(T0).unwrap().granted);
    assert!(!q.take(T0 + 400).unwrap().granted);
    let later = q.take(T0 + 500).unwrap();
    assert!(later.granted);
    assert_eq!(later.tokens, 0.0);
}

#[test]
fn peeking_changes_nothing_and_creates_nothing() {
    let (_runtime, q) = store("peek", "q", quota_params(0.2, 0.0, 2.0));
    let fresh = q.peek(T0).unwrap();
    assert_eq!((fresh.granted, fresh.tokens), (true, 2.0));
    assert!(!q.dir().exists());
    q.take(T0).unwrap();
    q.take(T0).unwrap();
    let before = fs::read(q.path()).unwrap();
    let empty = q.peek(T0 + 1000).unwrap();
    assert_eq!((empty.granted, empty.tokens), (false, 0.0));
    assert_eq!(fs::read(q.path()).unwrap(), before);
}

#[test]
fn an_empty_file_is_a_new_full_bucket() {
    let (_runtime, q) = store("empty", "q", quota_params(0.2, 0.0, 4.0));
    fs::create_dir(q.dir()).unwrap();
    fs::set_permissions(q.dir(), fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(q.path(), "").unwrap();
    let update = q.take(T0).unwrap();
    assert_eq!(
        (update.granted, update.tokens, update.note),
        (true, 3.0, None)
    );
}

#[test]
fn a_damaged_file_is_reset_to_a_full_bucket_with_a_note() {
    for garbage in [
        b"hello\n".to_vec(),
        vec![0u8; RECORD_LEN],
        vec![b'x'; 4096],
        format!("{:<63}\n", "retry-quota v1 tokens=-3 at=1").into_bytes(),
    ] {
        let (_runtime, q) = store("damaged", "q", quota_params(0.2, 0.0, 5.0));
        q.deposit(T0).unwrap();
        fs::write(q.path(), &garbage).unwrap();
        let update = q.take(T0).unwrap();
        assert!(update.granted);
        assert_eq!(update.tokens, 4.0);
        assert_eq!(update.note, Some(Note::Damaged { path: q.path() }));
        let warning = update.note.unwrap().to_string();
        assert!(warning.contains("damaged"), "{warning}");
        assert!(
            warning.contains(&q.path().display().to_string()),
            "{warning}"
        );
        // The file holds a whole record again, and reads without a note.
        let record = fs::read(q.path()).unwrap();
        assert_eq!(record.len(), RECORD_LEN);
        assert_eq!(Bucket::decode(&record).unwrap().tokens, 4.0);
        assert_eq!(q.take(T0).unwrap().note, None);
    }
}

#[test]
fn concurrent_takes_lose_no_update() {
    // 8 threads, 50 retries each, on a bucket that starts with 10 tokens and never refills:
    // exactly 10 are granted. Each operation opens the file anew, so the threads contend for
    // the lock as separate processes would.
    let (_runtime, q) = store("concurrent", "q", quota_params(0.0, 0.0, 10.0));
    let q = Arc::new(q);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let q = Arc::clone(&q);
            std::thread::spawn(move || {
                let (mut granted, mut busy) = (0, 0);
                for _ in 0..50 {
                    match q.take(unix_ms(SystemTime::now())) {
                        Ok(update) => granted += u32::from(update.granted),
                        // A loaded machine may keep a thread from the lock for 20 ms; that
                        // operation is not done, and no token is lost or made by it.
                        Err(StoreError::Busy { .. }) => busy += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
                (granted, busy)
            })
        })
        .collect();
    let results: Vec<(u32, u32)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let granted: u32 = results.iter().map(|r| r.0).sum();
    let busy: u32 = results.iter().map(|r| r.1).sum();
    assert!(busy < 400 - 10, "almost every take was busy: {results:?}");
    assert_eq!(granted, 10, "{results:?}");
    let left = q.peek(unix_ms(SystemTime::now())).unwrap();
    assert_eq!(left.tokens, 0.0);
}

#[test]
fn concurrent_deposits_and_takes_are_all_counted() {
    // 8 threads of 100 retries and 100 first tries each on a bucket too large to fill or
    // empty: every operation that was done shows in what is left, none is lost to another's
    // write.
    let (_runtime, q) = store("counted", "q", quota_params(0.5, 0.0, 10_000.0));
    q.take(T0).unwrap();
    let q = Arc::new(q);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let q = Arc::clone(&q);
            std::thread::spawn(move || {
                let (mut takes, mut deposits) = (0u32, 0u32);
                for i in 0..200 {
                    let done = if i % 2 == 0 {
                        q.take(T0).map(|u| {
                            assert!(u.granted);
                            takes += 1;
                        })
                    } else {
                        q.deposit(T0).map(|_| deposits += 1)
                    };
                    match done {
                        Ok(()) | Err(StoreError::Busy { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
                (takes, deposits)
            })
        })
        .collect();
    let (mut takes, mut deposits) = (0, 0);
    for t in threads {
        let (t, d) = t.join().unwrap();
        takes += t;
        deposits += d;
    }
    let expected = 10_000.0 - 1.0 - f64::from(takes) + 0.5 * f64::from(deposits);
    assert_eq!(
        q.peek(T0).unwrap().tokens,
        expected,
        "{takes} takes, {deposits} deposits"
    );
}

#[test]
fn a_held_lock_makes_an_operation_busy_at_once_instead_of_waiting() {
    let (_runtime, q) = store("busy", "q", QuotaParams::default());
    q.deposit(T0).unwrap();
    let before = fs::read(q.path()).unwrap();
    let _holder = LockHolder::lock(&q.path());
    type Op = fn(&LocalStore, u64) -> Result<Update, StoreError>;
    for op in [
        LocalStore::take as Op,
        LocalStore::deposit,
        LocalStore::peek,
    ] {
        let started = Instant::now();
        let e = op(&q, T0).unwrap_err();
        let took = started.elapsed();
        assert!(matches!(e, StoreError::Busy { .. }), "{e}");
        assert!(e.to_string().contains("busy"), "{e}");
        // It tried for LOCK_WAIT, and gave up well before the holder's 30 s.
        assert!(took >= LOCK_WAIT, "{took:?}");
        assert!(took < Duration::from_millis(250), "{took:?}");
    }
    // Through the interface every quota store offers, busy is told from failed: the runner
    // counts a busy retry as refused, and drops a store that failed.
    let as_store: &dyn BucketStore = &q;
    for answer in [as_store.take(T0), as_store.deposit(T0), as_store.peek(T0)] {
        assert!(matches!(answer, Err(Unanswered::Busy(ref why)) if why.contains("busy")));
    }
    assert_eq!(
        fs::read(q.path()).unwrap(),
        before,
        "a busy store is left as it was"
    );
}

#[test]
fn a_store_that_cannot_be_used_fails_through_the_common_interface() {
    let base = common::temp_dir("quota-failed");
    let not_a_dir = base.join("file");
    fs::write(&not_a_dir, "").unwrap();
    let q = LocalStore::in_dir(not_a_dir, "q", QuotaParams::default()).unwrap();
    let as_store: &dyn BucketStore = &q;
    match as_store.take(T0) {
        Err(Unanswered::Failed(why)) => assert!(why.contains("not a directory"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_holder_of_the_lock_killed_with_sigkill_stalls_nobody() {
    let (_runtime, q) = store("killed", "q", quota_params(0.0, 0.0, 10.0));
    q.take(T0).unwrap();
    let mut holder = LockHolder::lock(&q.path());
    assert!(matches!(q.take(T0), Err(StoreError::Busy { .. })));
    holder.release();
    let started = Instant::now();
    let update = q.take(T0).unwrap();
    assert!(started.elapsed() < Duration::from_millis(250));
    assert!(update.granted);
    assert_eq!(update.tokens, 8.0);
    assert_eq!(update.note, None);
}

#[test]
fn a_fifo_in_place_of_the_quota_file_is_refused_at_once() {
    let (_runtime, q) = store("fifo-file", "q", QuotaParams::default());
    q.deposit(T0).unwrap();
    fs::remove_file(q.path()).unwrap();
    nix::unistd::mkfifo(&q.path(), nix::sys::stat::Mode::S_IRWXU).unwrap();
    type Op = fn(&LocalStore, u64) -> Result<Update, StoreError>;
    for op in [
        LocalStore::peek as Op,
        LocalStore::take,
        LocalStore::deposit,
    ] {
        let started = Instant::now();
        let e = op(&q, T0).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(
            matches!(
                e,
                StoreError::Unsafe {
                    problem: Problem::NotRegularFile,
                    ..
                }
            ),
            "{e}"
        );
    }
}

#[test]
fn the_dry_run_of_a_quota_whose_file_is_a_fifo_ends_at_once() {
    let (runtime, q) = store("fifo-dry", "q", QuotaParams::default());
    q.deposit(T0).unwrap();
    fs::remove_file(q.path()).unwrap();
    nix::unistd::mkfifo(&q.path(), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let started = Instant::now();
    let out = common::retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .timeout(common::STEP_LIMIT)
        .args(["--dry-run", "--quota", "q", "-n", "2"])
        .output()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr_of(&out));
    // A run goes on with its own limits and says why.
    let out = common::retry()
        .env("XDG_RUNTIME_DIR", &runtime)
        .timeout(common::STEP_LIMIT)
        .args(["--quota", "q", "-n", "1", "--", "true"])
        .output()
        .unwrap();
    let log = common::stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(log.contains("not a regular file"), "{log}");
}

#[test]
fn a_quota_file_that_others_may_write_or_another_user_owns_is_refused() {
    let (_runtime, q) = store("untrusted-file", "q", quota_params(0.0, 0.0, 10.0));
    q.take(T0).unwrap();
    let before = fs::read(q.path()).unwrap();
    let mut owners = vec![(euid(), 0o666), (euid(), 0o620)];
    owners.extend(other_user().map(|other| (other, 0o600)));
    for (owner, m) in owners {
        std::os::unix::fs::chown(q.path(), Some(owner), None).unwrap();
        fs::set_permissions(q.path(), fs::Permissions::from_mode(m)).unwrap();
        let e = q.take(T0).unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::Unsafe {
                    problem: Problem::Untrusted { uid, mode, .. },
                    ..
                } if uid == owner && mode == m
            ),
            "{owner} {m:o}: {e}"
        );
        let message = e.to_string();
        assert!(
            message.contains(&format!("uid {owner}")) && message.contains(&format!("{m:04o}")),
            "{message}"
        );
        assert!(q.peek(T0).is_err());
        assert_eq!(fs::read(q.path()).unwrap(), before, "left as it was");
    }
}

#[test]
fn the_store_is_private_whatever_the_umask() {
    use std::os::unix::process::CommandExt;
    let runtime = common::temp_dir("umask");
    let mut cmd = common::retry_std();
    cmd.env("XDG_RUNTIME_DIR", &runtime)
        .args(["--quota", "q", "-n", "1", "--", "true"]);
    // SAFETY: umask is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o277));
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    assert_eq!(
        common::wait_bounded(&mut child, common::TEST_LIMIT).code(),
        Some(0)
    );
    let dir = runtime.join("retry");
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("q.quota")), 0o600);
    assert_eq!(fs::read(dir.join("q.quota")).unwrap().len(), RECORD_LEN);
}
