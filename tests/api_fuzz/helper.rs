//! The second thread calls are sent to (cross-thread orchestrator misuse, last-error
//! isolation).

use std::sync::mpsc;

// ---------------------------------------------------------------------------------------
// Helper thread: a second thread that runs calls synchronously for the main thread.

struct SendJob(Box<dyn FnOnce() + 'static>);
// SAFETY: a job only carries raw pointers to objects the main thread keeps alive and does
// not touch while it waits for the job (Helper::run blocks until the job has run); dagrt's
// objects may be called from any thread, which is what the fuzzer exercises.
unsafe impl Send for SendJob {}

pub(crate) struct Helper {
    tx: Option<mpsc::Sender<SendJob>>,
    done: mpsc::Receiver<()>,
    join: Option<std::thread::JoinHandle<()>>,
}

impl Helper {
    pub(crate) fn new() -> Helper {
        let (tx, rx) = mpsc::channel::<SendJob>();
        let (dtx, drx) = mpsc::channel::<()>();
        let join = std::thread::Builder::new()
            .name("fuzz-helper".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    (job.0)();
                    if dtx.send(()).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn the helper thread");
        Helper {
            tx: Some(tx),
            done: drx,
            join: Some(join),
        }
    }

    /// Run `f` on the helper thread and wait for its result.
    pub(crate) fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        let mut out: Option<T> = None;
        {
            let slot: *mut Option<T> = &mut out;
            let job: Box<dyn FnOnce() + '_> = Box::new(move || {
                let v = f();
                // SAFETY: `out` outlives the job: run() waits below until the job has run.
                unsafe { *slot = Some(v) };
            });
            // SAFETY: only the lifetime is erased; run() does not return before the helper
            // has run (and so dropped) the job, so nothing it borrows is used after that.
            let job: Box<dyn FnOnce() + 'static> = unsafe { std::mem::transmute(job) };
            self.tx
                .as_ref()
                .expect("helper channel")
                .send(SendJob(job))
                .expect("the helper thread is gone");
            self.done.recv().expect("the helper thread died");
        }
        out.expect("the helper ran the job")
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}
