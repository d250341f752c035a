//! The way to a record file (docs/decisions.md#dead-letters-and-replay): every directory from `/`
//! down to the history, the dead-letter file or the quota's store belongs to root or the user
//! running `retry`, one that others may write has the sticky bit, and a symbolic link on the way is
//! followed only when root or that user owns it. Tried as root, with a second user making the
//! directories and links that root's records must not go through.

use crate::common;

use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt, lchown, symlink};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use common::{euid, have_package, retry, stderr_of, usage_error_of};

/// The second user, or `None` (said loudly; a failure under RETRY_REQUIRE_PACKAGES=1) when
/// this process is not root or cannot create one.
fn second_user(test: &str) -> Option<u32> {
    let found = common::other_user();
    let what = "a second user (root, and useradd to make one)";
    have_package(test, what, "passwd", found.is_some()).then_some(found?)
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A directory `path`, made with `mode` and given to `owner`.
fn dir_of(path: &Path, owner: u32, mode: u32) {
    std::fs::create_dir_all(path).unwrap();
    chmod(path, mode);
    std::os::unix::fs::chown(path, Some(owner), None).unwrap();
}

/// A symbolic link `at` to `target`, owned by `owner`.
fn link_of(at: &Path, target: &Path, owner: u32) {
    symlink(target, at).unwrap();
    lchown(at, Some(owner), None).unwrap();
}

/// A directory right in `/tmp` (so the way there is the real one), removed when dropped.
struct InTmp(PathBuf);

impl InTmp {
    fn new(name: &str) -> InTmp {
        let path = PathBuf::from(format!("/tmp/retry-paths-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        InTmp(path)
    }
}

impl Drop for InTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `retry ARGS -- touch ran` in `dir`, bounded.
fn run(dir: &Path, args: &[&OsStr]) -> Output {
    retry()
        .current_dir(dir)
        .timeout(common::STEP_LIMIT)
        .env_remove("XDG_RUNTIME_DIR")
        .args(args)
        .args(["--", "touch", "ran"])
        .output()
        .unwrap()
}

/// `retry ARGS` is refused in `dir` (`common::assert_refused`), with no XDG_RUNTIME_DIR.
fn refused(dir: &Path, args: &[&OsStr], needles: &[&str]) {
    common::assert_refused(
        retry().env_remove("XDG_RUNTIME_DIR").args(args),
        dir,
        needles,
    );
}

/// `--history`, `--dead-letter` and `--replay` (run and dry run) of files in `records` are
/// each refused with the needles.
fn every_record_file_refused(dir: &Path, records: &Path, needles: &[&str]) {
    let history = records.join("h.jsonl");
    let letters = records.join("d.jsonl");
    let os = OsStr::new;
    refused(dir, &[os("--history"), history.as_os_str()], needles);
    refused(dir, &[os("--dead-letter"), letters.as_os_str()], needles);
    for dry in [&[][..], &[os("--dry-run")]] {
        let mut args = vec![os("--replay"), letters.as_os_str()];
        args.extend(dry);
        let started = Instant::now();
        let out = retry()
            .current_dir(dir)
            .timeout(common::STEP_LIMIT)
            .args(&args)
            .output()
            .unwrap();
        let log = usage_error_of(&out, &format!("{args:?}"));
        for needle in needles {
            assert!(log.contains(needle), "{args:?}: {needle:?} in {log}");
        }
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

/// A run with its quota's store under `tmpdir`: it warns once with every needle and goes on
/// with its own limits (two tries, as `-n 2` says).
fn quota_store_refused(dir: &Path, tmpdir: &Path, needles: &[&str]) {
    let out = retry()
        .current_dir(dir)
        .timeout(common::STEP_LIMIT)
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", tmpdir)
        .args([
            "--quota", "q", "-n", "2", "-d", "1ms", "--", "sh", "-c", "exit 3",
        ])
        .output()
        .unwrap();
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(3), "{log}");
    let warning: Vec<&str> = log.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warning.len(), 1, "{log}");
    for needle in needles {
        assert!(warning[0].contains(needle), "{needle:?} in {log}");
    }
    assert!(
        warning[0].contains("only this run's own limits apply"),
        "{log}"
    );
    assert!(log.contains("gave up after 2 tries"), "{log}");
}

/// A dead-letter file of one run that gave up, made straight in `dir`.
fn one_dead_letter(dir: &Path) {
    let out = retry()
        .current_dir(dir)
        .args([
            "--dead-letter",
            "d.jsonl",
            "-n",
            "1",
            "--",
            "sh",
            "-c",
            "exit 3",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
}

/// What `dir` holds, by name and length, to see that nothing was written there.
fn contents(dir: &Path) -> Vec<(String, u64)> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    all.sort();
    all
}

#[test]
fn another_users_directory_in_tmp_holding_a_link_to_roots_directory_takes_no_record() {
    let Some(other) = second_user("another_users_directory_in_tmp") else {
        return;
    };
    let base = common::temp_dir("paths-issue");
    let victim = base.join("victim");
    std::fs::create_dir(&victim).unwrap();
    one_dead_letter(&victim);
    let before = contents(&victim);
    // As the other user would: /tmp/D, 0755, and in it `logs` pointing at root's directory.
    let theirs = InTmp::new("D");
    dir_of(&theirs.0, other, 0o755);
    let logs = theirs.0.join("logs");
    link_of(&logs, &victim, other);
    let shown = theirs.0.display().to_string();
    let needles = [
        shown.as_str(),
        &format!("owned by uid {other}"),
        "mode 0755",
    ];
    every_record_file_refused(&base, &logs, &needles);
    quota_store_refused(&base, &logs, &needles);
    assert_eq!(
        contents(&victim),
        before,
        "nothing written in root's directory"
    );
    assert!(!base.join("ran").exists());
}

#[test]
fn a_directory_anyone_may_write_without_the_sticky_bit_on_the_way_takes_no_record() {
    let base = common::temp_dir("paths-open");
    let open = base.join("open");
    let deep = open.join("deep");
    std::fs::create_dir_all(&deep).unwrap();
    chmod(&open, 0o777);
    let shown = open.display().to_string();
    let needles = [shown.as_str(), "mode 0777", "no sticky bit"];
    every_record_file_refused(&base, &deep, &needles);
    quota_store_refused(&base, &deep, &needles);
    // Not made either: nothing is made in a way that is refused.
    every_record_file_refused(&base, &open.join("new"), &needles);
    assert!(!open.join("new").exists());
    assert_eq!(contents(&deep), vec![]);
    // With the sticky bit, as /tmp, the same way is taken.
    chmod(&open, 0o1777);
    let out = run(
        &base,
        &[OsStr::new("--history"), deep.join("h.jsonl").as_os_str()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(deep.join("h.jsonl").exists());
}

#[test]
fn another_users_link_on_the_way_is_not_followed_even_where_only_root_may_write() {
    let Some(other) = second_user("another_users_link_on_the_way") else {
        return;
    };
    let base = common::temp_dir("paths-their-link");
    let victim = base.join("victim");
    std::fs::create_dir(&victim).unwrap();
    one_dead_letter(&victim);
    let before = contents(&victim);
    // A link in a directory of root's, 0755: only its owner chose where it leads.
    let link = base.join("logs");
    link_of(&link, &victim, other);
    let shown = format!("symbolic link '{}', owned by uid {other}", link.display());
    every_record_file_refused(&base, &link, &[&shown]);
    quota_store_refused(&base, &link, &[&shown]);
    // Deeper on the way too, and named relative to where `retry` runs.
    let os = OsStr::new;
    refused(&base, &[os("--history"), os("logs/sub/h.jsonl")], &[&shown]);
    assert_eq!(contents(&victim), before);
}

#[test]
fn a_link_of_root_is_followed_and_the_way_to_its_target_is_checked_too() {
    let base = common::temp_dir("paths-our-link");
    let target = base.join("target");
    std::fs::create_dir(&target).unwrap();
    let ours = base.join("ours");
    link_of(&ours, &target, euid());
    let out = run(
        &base,
        &[OsStr::new("--history"), ours.join("h.jsonl").as_os_str()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(target.join("h.jsonl").exists());
    // A link of ours, and a relative one, to a place whose way is refused.
    let open = base.join("open");
    std::fs::create_dir_all(open.join("deep")).unwrap();
    chmod(&open, 0o777);
    let to_open = base.join("to-open");
    link_of(&to_open, Path::new("open/deep"), euid());
    let shown = open.display().to_string();
    every_record_file_refused(&base, &to_open, &[&shown, "mode 0777"]);
    // And a link to another user's directory.
    let Some(other) = second_user("a_link_of_root_is_followed") else {
        return;
    };
    let theirs = base.join("theirs");
    dir_of(&theirs, other, 0o755);
    let to_theirs = base.join("to-theirs");
    link_of(&to_theirs, &theirs, euid());
    let shown = theirs.display().to_string();
    every_record_file_refused(&base, &to_theirs, &[&shown, &format!("uid {other}")]);
    assert_eq!(contents(&theirs), vec![]);
}

#[test]
fn a_file_right_in_tmp_and_a_relative_path_are_taken() {
    let in_tmp = InTmp::new("h.jsonl");
    let out = run(
        Path::new("/"),
        &[OsStr::new("--history"), in_tmp.0.as_os_str()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(std::fs::metadata(&in_tmp.0).unwrap().uid(), euid());
    let base = common::temp_dir("paths-relative");
    let os = OsStr::new;
    let args = [os("--history"), os("new/deeper/h.jsonl")];
    let out = run(&base, &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    for (made, mode) in [
        ("new", 0o700),
        ("new/deeper", 0o700),
        ("new/deeper/h.jsonl", 0o600),
    ] {
        let meta = std::fs::metadata(base.join(made)).unwrap();
        assert_eq!(meta.mode() & 0o7777, mode, "{made}");
    }
    let out = run(
        &base.join("new"),
        &[os("--history"), os("./deeper/../deeper/h.jsonl")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let text = std::fs::read_to_string(base.join("new/deeper/h.jsonl")).unwrap();
    assert_eq!(text.lines().count(), 2);
}

#[test]
fn dot_dot_goes_back_from_where_a_link_led_and_what_it_passed_is_checked() {
    let base = common::temp_dir("paths-dotdot");
    let inner = base.join("a").join("b");
    std::fs::create_dir_all(&inner).unwrap();
    link_of(&base.join("to-b"), &inner, euid());
    // As the kernel takes it: `..` of where the link led, not of the link.
    let os = OsStr::new;
    let out = run(&base, &[os("--history"), os("to-b/../h.jsonl")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(base.join("a").join("h.jsonl").exists());
    assert!(!base.join("h.jsonl").exists());
    let Some(other) = second_user("dot_dot_goes_back") else {
        return;
    };
    // Another user's directory passed and left by `..` is still on the way: they could put
    // a link in its place, and `..` would go back from wherever it led.
    let theirs = base.join("theirs");
    dir_of(&theirs, other, 0o755);
    let shown = theirs.display().to_string();
    refused(
        &base,
        &[os("--history"), os("theirs/../h2.jsonl")],
        &[&shown],
    );
    assert!(!base.join("h2.jsonl").exists());
}

#[test]
fn a_loop_of_links_on_the_way_is_refused_at_once() {
    let base = common::temp_dir("paths-loop");
    link_of(&base.join("a"), Path::new("b"), euid());
    link_of(&base.join("b"), Path::new("a"), euid());
    link_of(&base.join("here"), Path::new("."), euid());
    let os = OsStr::new;
    refused(
        &base,
        &[os("--history"), os("a/h.jsonl")],
        &["symbolic links"],
    );
    refused(
        &base,
        &[os("-n1"), os("--dead-letter"), os("b/d.jsonl")],
        &["symbolic links"],
    );
    // (The quota's store is never looked for there: TMPDIR must name a directory.)
    // A link to its own directory is no loop: each step goes somewhere.
    let out = run(&base, &[os("--history"), os("here/here/here/h.jsonl")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(base.join("h.jsonl").exists());
}

/// `retry ARGS` run as `uid` (its primary group, no others), in `dir`, bounded.
fn as_user(uid: u32, dir: &Path, args: &[&OsStr]) -> Output {
    let gid = std::process::Command::new("id")
        .args(["-g", &uid.to_string()])
        .output()
        .unwrap();
    let gid = String::from_utf8_lossy(&gid.stdout).trim().to_string();
    assert_cmd::Command::new("setpriv")
        .current_dir(dir)
        .timeout(common::STEP_LIMIT)
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", dir)
        .args([format!("--reuid={uid}"), format!("--regid={gid}")])
        .arg("--clear-groups")
        .arg(assert_cmd::cargo::cargo_bin("retry"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_second_user_keeps_records_below_roots_directories_but_never_in_roots_files() {
    let test = "the_second_user_keeps_records";
    let Some(other) = second_user(test) else {
        return;
    };
    if !have_package(test, "setpriv", "util-linux", common::on_path("setpriv")) {
        return;
    }
    let base = common::temp_dir("paths-as-user");
    chmod(&base, 0o1777);
    one_dead_letter(&base);
    let history = base.join("h.jsonl");
    std::fs::write(&history, "").unwrap();
    let os = OsStr::new;
    for mode in [0o644, 0o666] {
        chmod(&history, mode);
        chmod(&base.join("d.jsonl"), mode);
        let before = contents(&base);
        for args in [
            &[os("--history"), os("h.jsonl"), os("--"), os("true")][..],
            &[os("--dead-letter"), os("d.jsonl"), os("--"), os("true")],
            &[os("--replay"), os("d.jsonl")],
            &[os("--replay"), os("d.jsonl"), os("--dry-run")],
        ] {
            let out = as_user(other, &base, args);
            usage_error_of(&out, &format!("{mode:o} {args:?}"));
        }
        assert_eq!(
            contents(&base),
            before,
            "{mode:o}: root's files as they were"
        );
    }
    // Their own, below root's directories and a sticky one: taken, and private.
    let args = [
        os("--history"),
        os("mine/h.jsonl"),
        os("--quota"),
        os("q"),
        os("--"),
        os("true"),
    ];
    let out = as_user(other, &base, &args);
    let log = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{log}");
    assert!(!log.contains("warning"), "{log}");
    let meta = std::fs::metadata(base.join("mine/h.jsonl")).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (other, 0o600));
    let store = base.join(format!("retry-{other}"));
    assert_eq!(std::fs::metadata(store).unwrap().uid(), other);
}
