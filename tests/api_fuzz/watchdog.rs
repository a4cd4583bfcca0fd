//! The hang detector: a stuck call aborts the process with the call log instead of hanging
//! the test.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// Watchdog: aborts the process, with the log of the sequence that hung, when no call
// completes for too long.

pub(crate) struct Shared {
    pub(crate) progress: AtomicU64,
    pub(crate) seed: AtomicU64,
    pub(crate) log: Mutex<Vec<String>>,
    pub(crate) stop: AtomicBool,
}

pub(crate) fn start_watchdog(shared: Arc<Shared>, hang: Duration) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("fuzz-watchdog".into())
        .spawn(move || {
            let mut last = shared.progress.load(SeqCst);
            let mut since = Instant::now();
            while !shared.stop.load(SeqCst) {
                std::thread::sleep(Duration::from_millis(200));
                let now = shared.progress.load(SeqCst);
                if now != last {
                    last = now;
                    since = Instant::now();
                    continue;
                }
                if since.elapsed() > hang {
                    let seed = shared.seed.load(SeqCst);
                    use std::io::Write as _;
                    let mut err = std::io::stderr().lock();
                    let log = shared.log.lock().unwrap_or_else(|p| p.into_inner());
                    let tail = log.len().saturating_sub(300);
                    let _ = writeln!(err,
                        "\n*** api_fuzz HANG: no dagrt call returned for {hang:?} in sequence seed {seed:#x}\n\
                         *** replay: DAGRT_FUZZ_SEED={seed:#x} DAGRT_FUZZ_SEQS=1\n\
                         *** call log (last {} of {} lines; the last line is the call that hung or the one before it):",
                        log.len() - tail,
                        log.len()
                    );
                    for l in &log[tail..] {
                        let _ = writeln!(err,"    {l}");
                    }
                    std::process::abort();
                }
            }
        })
        .expect("spawn the watchdog")
}
