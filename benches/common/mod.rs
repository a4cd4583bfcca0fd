//! Set-up shared by the Rust-API benches (`streaming.rs`, `tiled_dag.rs`).

use dagrt::callable::{register, Callable, CallableKind, Executor};
use dagrt::worker::{Worker, WorkerConfig};

/// With `--help` or `-h` among the arguments: print the bench's usage (the `//!` comment that
/// opens `src`, its source) and exit.
pub fn exit_on_help(src: &str) {
    if std::env::args().any(|a| a == "--help" || a == "-h") {
        for l in src.lines().take_while(|l| l.starts_with("//!")) {
            let l = l.trim_start_matches("//!");
            println!("{}", l.strip_prefix(' ').unwrap_or(l));
        }
        std::process::exit(0);
    }
}

/// The bench's `--flag value` pairs (`cargo bench` adds a `--bench` of its own).
pub fn flag_pairs() -> Vec<(String, String)> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    args.chunks(2)
        .map(|p| (p[0].clone(), p.get(1).cloned().unwrap_or_default()))
        .collect()
}

/// A started worker with `lanes` SUB lanes, and `exec` registered as task callable `name`.
pub fn sub_worker(cfg: WorkerConfig, lanes: u32, name: &str, exec: Executor) -> (Worker, Callable) {
    let mut w = Worker::new(cfg).expect("worker");
    w.add_sub_lanes(lanes).expect("lanes");
    w.init().expect("init");
    let c = register(
        name,
        0,
        CallableKind::Task as u32,
        exec,
        std::ptr::null_mut(),
    )
    .expect("register");
    (w, c)
}
