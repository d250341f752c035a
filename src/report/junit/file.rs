//! Where a `--junit` report goes: a report, not a record file, so none of the owner checks of
//! docs/files.md#files-that-outlive-a-run apply (a CI workspace often belongs to another user
//! than the job); but what stands at the path must be a regular file or nothing, and the report
//! replaces it whole: written to a new file beside it, then renamed over it, so that a reader
//! never sees half a report.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::store::open::check_type;
use crate::store::refusal::Refusal;

/// Whether the report may go to `path`, as the run starts: nothing there yet, or a regular
/// file; a symbolic link, a directory, a FIFO or a device is refused. A path that cannot be
/// looked at now (a directory that cannot be searched, a file on the way where a directory
/// should be) is not refused: the report is written at the end, and a report that cannot be
/// written is a warning then, never a reason not to run the command.
pub fn check(path: &Path) -> io::Result<()> {
    match check_now(path) {
        Err(e) if crate::store::refusal::refusal(&e).is_none() => Ok(()),
        checked => checked,
    }
}

/// Whether the report may go to `path` now: as [`check`], and a path that cannot be looked at
/// is refused.
fn check_now(path: &Path) -> io::Result<()> {
    if file_name(path).is_none() {
        return Err(Refusal::NotRegular("a directory").into());
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) => check_type(&meta).map_err(io::Error::from),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Replaces `path` with a file holding `bytes`: written to a new file in the same directory
/// (created with the mode 0666 that the umask narrows, as any file a program writes), synced,
/// checked again, then renamed over `path`. Missing directories are made, as test runners
/// make theirs. On any failure the new file is removed and `path` is left as it was.
pub fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    check_now(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let (temp, mut file) = create_beside(dir)?;
    let done = file
        .write_all(bytes)
        .and_then(|()| file.sync_data())
        // What stands at the path may have changed while the run went on.
        .and_then(|()| check_now(path))
        .and_then(|()| std::fs::rename(&temp, path));
    if done.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    done
}

/// A new file in `dir` that no other process has opened (`O_EXCL`), and its path.
fn create_beside(dir: &Path) -> io::Result<(PathBuf, File)> {
    let pid = std::process::id();
    let mut k = 0;
    loop {
        let temp = dir.join(format!(".retry-junit-{pid}-{k}.tmp"));
        let opened = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .custom_flags(nix::libc::O_CLOEXEC | nix::libc::O_NOFOLLOW)
            .open(&temp);
        match opened {
            Ok(file) => return Ok((temp, file)),
            // Left by a process of the same pid that was killed while it wrote.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && k < 100 => k += 1,
            Err(e) => return Err(e),
        }
    }
}

/// The last component of `path` when it names a file: not when it ends in `/` or `..`.
fn file_name(path: &Path) -> Option<&std::ffi::OsStr> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let ends_as_dir = bytes.ends_with(b"/") || bytes.ends_with(b"/.") || bytes == b".";
    path.file_name().filter(|_| !ends_as_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("retry-junit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_report_replaces_a_file_whole_and_leaves_nothing_beside_it() {
        let dir = dir("replace");
        let path = dir.join("sub").join("report.xml");
        replace(&path, b"one").unwrap();
        replace(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["report.xml"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_link_or_a_directory_at_the_path_is_refused_and_kept() {
        let dir = dir("refuse");
        let target = dir.join("target");
        std::fs::write(&target, "kept").unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let refused = |p: &Path| refusal(&replace(p, b"x").unwrap_err());
        assert_eq!(refused(&link), Some(Refusal::Symlink));
        assert_eq!(refused(&dir), Some(Refusal::NotRegular("a directory")));
        assert_eq!(
            refused(&dir.join("x/")),
            Some(Refusal::NotRegular("a directory"))
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"kept");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert!(check(&dir.join("missing.xml")).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn refusal(e: &io::Error) -> Option<Refusal> {
        crate::store::refusal(e)
    }
}
