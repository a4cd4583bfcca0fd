//! A file replaced whole: the trace and the DOT export are written under a temporary name
//! and renamed over their file, so a reader (or another recording into the same path, of this
//! process or another) only ever finds one complete document there.

use std::fs::File;
use std::io::Result;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A destination opened for writing whole. A regular file (or a path that does not exist
/// yet) is written under a temporary name of its own, unique to the process and the file,
/// beside the file the path resolves to, and renamed over that file by `commit`: a symlink
/// stays a link to the new contents. Anything else (a pipe, a device) is written directly.
/// Opening creates the file if missing but does not truncate it, so a path that cannot be
/// written fails at `open`, and the file holds what it held until `commit`.
pub struct WholeFile {
    path: PathBuf,
    /// Taken by `commit`.
    file: Option<File>,
    /// (the temporary file, the file it replaces) for a regular file, until `commit`; a
    /// temporary file still here when dropped is removed.
    tmp: Option<(PathBuf, PathBuf)>,
}

impl WholeFile {
    /// Open `path`; on failure, the path that could not be created and why.
    pub fn open(path: &Path) -> std::result::Result<WholeFile, (PathBuf, std::io::Error)> {
        // Temporary-name counter: only keeps this process's temporaries apart; no invariant.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        fn failed(p: &Path) -> impl FnOnce(std::io::Error) -> (PathBuf, std::io::Error) + '_ {
            move |x| (p.to_path_buf(), x)
        }
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false) // replaced whole at commit; until then it holds what it held
            .open(path)
            .map_err(failed(path))?;
        if !f.metadata().is_ok_and(|m| m.is_file()) {
            let path = path.to_path_buf();
            return Ok(WholeFile {
                path,
                file: Some(f),
                tmp: None,
            });
        }
        let target = std::fs::canonicalize(path).map_err(failed(path))?;
        let mut tmp = target.clone().into_os_string();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        tmp.push(format!(".{}.{n}.tmp", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let file = File::create(&tmp).map_err(failed(&tmp))?;
        Ok(WholeFile {
            path: path.to_path_buf(),
            file: Some(file),
            tmp: Some((tmp, target)),
        })
    }

    /// The path as it was given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write the contents with `write`, then put them in place: a regular file is synced and
    /// renamed over its target (the temporary file is removed if anything failed).
    pub fn commit(mut self, write: impl FnOnce(File) -> Result<File>) -> Result<()> {
        let written = write(self.file.take().expect("committed once"));
        let Some((tmp, target)) = self.tmp.take() else {
            return written.map(drop); // a pipe or device refuses fsync (EINVAL)
        };
        let done = written
            .and_then(|f| f.sync_all())
            .and_then(|()| std::fs::rename(&tmp, &target));
        if done.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        done
    }
}

impl Drop for WholeFile {
    fn drop(&mut self) {
        if let Some((tmp, _)) = self.tmp.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}
