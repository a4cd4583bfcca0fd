//! Timeline tracing: Chrome trace-event JSON (opens in Perfetto and chrome://tracing) with one
//! track per lane, one slice per task (callable name, run id, slot), flow arrows for the
//! dependency edges, and scheduler tracks (one per thread that ran scheduler passes: the
//! scheduler thread, each lane that took the role after a completion, and the submitting
//! thread when it ran one for a scheduler thread and lane both asleep); plus a Graphviz DOT
//! export of a run's DAG.
//!
//! Recording is off unless a trace was started (`DAGRT_TRACE=<path>` at init, or
//! `dagrt_worker_trace_start`); when off, the hot path pays one relaxed load per event site.

use crate::run::RunId;
use crate::slot::SlotId;
use crate::spsc::Padded;
use crate::wholefile::WholeFile;
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

struct TaskEvent {
    lane: u32,
    name: &'static str,
    run: RunId,
    slot: SlotId,
    member: u32,
    t0: u64,
    t1: u64,
    failed: bool,
}

struct Node {
    run: RunId,
    slot: SlotId,
    name: &'static str,
    kind: &'static str,
}

struct EdgeEvent {
    run: RunId,
    from: SlotId,
    to: SlotId,
    retain: bool,
}

/// Which thread of the traced worker ran a scheduler pass: each has a track of its own.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum By {
    /// The worker's scheduler thread.
    Scheduler,
    /// One of the worker's lanes, after a completion.
    Lane(u32),
    /// A thread that is neither: the one submitting, for a scheduler thread and lane both
    /// asleep (`scheduler::pass_for_parked`). A lane or scheduler thread of another worker
    /// building a run on this one (a nested worker) is such a thread here.
    Submitter,
}

struct SchedEvent {
    by: By,
    name: &'static str,
    t0: u64,
    t1: u64,
    count: u32,
}

/// What one thread records while running tasks and passes.
#[derive(Default)]
struct Timeline {
    tasks: Vec<TaskEvent>,
    sched: Vec<SchedEvent>,
}

/// The DAG, recorded by the thread building the run.
#[derive(Default)]
struct Graph {
    nodes: Vec<Node>,
    edges: Vec<EdgeEvent>,
}

thread_local! {
    /// The worker thread this is, if it is one (set once at its start), with the address of
    /// its worker's `Trace`: what it records for another worker is not its own worker's.
    static THREAD: std::cell::Cell<Option<(usize, By)>> = const { std::cell::Cell::new(None) };
}

/// Mark the calling thread as lane `idx`'s thread of the worker `t` traces (its tasks go on the
/// lane's track, its scheduler passes on one of their own).
pub fn set_lane_thread(t: &Trace, idx: u32) {
    THREAD.with(|c| c.set(Some((t as *const Trace as usize, By::Lane(idx)))));
}

/// Mark the calling thread as the scheduler thread of the worker `t` traces.
pub fn set_scheduler_thread(t: &Trace) {
    THREAD.with(|c| c.set(Some((t as *const Trace as usize, By::Scheduler))));
}

/// Why `Trace::start` did not start a recording.
#[derive(Debug)]
pub enum StartError {
    /// A recording into this file is in progress.
    Recording(PathBuf),
    /// The file could not be created.
    Create(PathBuf, std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Recording(p) => write!(
                f,
                "a trace is already being recorded to {} (stop it first)",
                p.display()
            ),
            StartError::Create(p, x) => {
                write!(f, "cannot create the trace file {}: {x}", p.display())
            }
        }
    }
}

pub struct Trace {
    /// Recording on/off; a relaxed flag (events straddling a toggle may or may not be kept).
    enabled: AtomicBool,
    epoch: Instant,
    /// Lane names by lane index, fixed at init.
    lane_names: Vec<String>,
    /// The file of the recording in progress (written whole at stop), opened when it started.
    /// `enabled` changes only under this lock, so recording is on exactly when a file is open.
    out: Mutex<Option<WholeFile>>,
    /// Lane `i`'s thread records into timeline `i`, every other thread (the scheduler
    /// thread, a host) into the last one: lanes recording a task each never wait on each
    /// other's lock or pull its line. (With one shared buffer, a traced 64-tile Cholesky kept
    /// 91.6% of its lanes' time in kernels; with these 93.0%, against 95% untraced.)
    /// Lock order: the timelines by index, then `graph`; a recording site holds one lock.
    timelines: Box<[Padded<Mutex<Timeline>>]>,
    /// The recorded DAG (nodes and edges, for flows and the DOT export), written by the
    /// orchestrator thread and read by writers of the file.
    graph: Mutex<Graph>,
}

impl Trace {
    pub fn new(lane_names: Vec<String>) -> Trace {
        let timelines = (0..=lane_names.len())
            .map(|_| Padded(Mutex::new(Timeline::default())))
            .collect();
        Trace {
            enabled: AtomicBool::new(false),
            epoch: Instant::now(),
            lane_names,
            out: Mutex::new(None),
            timelines,
            graph: Mutex::new(Graph::default()),
        }
    }

    #[inline]
    pub fn on(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Which of this worker's threads the calling thread is.
    fn by(&self) -> By {
        THREAD
            .with(|c| c.get())
            .filter(|&(t, _)| t == self as *const Trace as usize)
            .map_or(By::Submitter, |(_, by)| by)
    }

    /// The calling thread's timeline.
    fn timeline(&self) -> MutexGuard<'_, Timeline> {
        let last = self.timelines.len() - 1;
        let i = match self.by() {
            By::Lane(l) => (l as usize).min(last),
            By::Scheduler | By::Submitter => last,
        };
        lock(&self.timelines[i])
    }

    fn graph(&self) -> MutexGuard<'_, Graph> {
        lock(&self.graph)
    }

    /// Start recording into `path`, which is opened (created if missing) now: a path that cannot
    /// be written fails here, not after the run it was to record. The events of an earlier
    /// recording are dropped, so each file holds its own recording only.
    pub fn start(&self, path: PathBuf) -> Result<(), StartError> {
        let mut out = lock(&self.out);
        if let Some(o) = out.as_ref() {
            return Err(StartError::Recording(o.path().to_path_buf()));
        }
        let file = WholeFile::open(&path).map_err(|(p, x)| StartError::Create(p, x))?;
        for t in self.timelines.iter() {
            *lock(t) = Timeline::default();
        }
        *self.graph() = Graph::default();
        *out = Some(file);
        self.enabled.store(true, Ordering::Release);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub fn task(
        &self,
        lane: u32,
        name: &'static str,
        run: RunId,
        slot: SlotId,
        member: u32,
        t0: u64,
        t1: u64,
        failed: bool,
    ) {
        self.timeline().tasks.push(TaskEvent {
            lane,
            name,
            run,
            slot,
            member,
            t0,
            t1,
            failed,
        });
    }

    pub fn node(&self, run: RunId, slot: SlotId, name: &'static str, kind: &'static str) {
        self.graph().nodes.push(Node {
            run,
            slot,
            name,
            kind,
        });
    }

    pub fn edge(&self, run: RunId, from: SlotId, to: SlotId, retain: bool) {
        self.graph().edges.push(EdgeEvent {
            run,
            from,
            to,
            retain,
        });
    }

    pub fn sched(&self, name: &'static str, t0: u64, t1: u64, count: u32) {
        let by = self.by();
        self.timeline().sched.push(SchedEvent {
            by,
            name,
            t0,
            t1,
            count,
        });
    }

    /// Stop recording and write the Chrome trace JSON. Returns the path written, if any.
    /// (The flag is cleared under the file lock: a `start` racing this stop either comes first
    /// and is stopped with it, or finds no recording and starts its own, flag and file.)
    ///
    /// Written whole (`WholeFile`); the events are streamed, and dropped once written (the DAG
    /// stays for the DOT export).
    pub fn stop(&self) -> Result<Option<PathBuf>, (PathBuf, std::io::Error)> {
        let mut out = lock(&self.out);
        self.enabled.store(false, Ordering::Release);
        let Some(file) = out.take() else {
            return Ok(None);
        };
        let path = file.path().to_path_buf();
        let written = file.commit(|f| self.write_to(f));
        for t in self.timelines.iter() {
            *lock(t) = Timeline::default();
        }
        match written {
            Ok(()) => Ok(Some(path)),
            Err(x) => Err((path, x)),
        }
    }

    fn write_to(&self, f: File) -> std::io::Result<File> {
        let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
        self.write_chrome(&mut w)?;
        w.into_inner().map_err(|x| x.into_error())
    }

    /// The recorded events as a Chrome trace-event JSON document.
    pub fn chrome_json(&self) -> String {
        let mut v = Vec::new();
        self.write_chrome(&mut v)
            .expect("writing into memory cannot fail");
        String::from_utf8(v).expect("the document is UTF-8")
    }

    /// Write the recorded events as a Chrome trace-event JSON document, event by event.
    fn write_chrome(&self, w: &mut impl Write) -> std::io::Result<()> {
        let timelines: Vec<_> = self.timelines.iter().map(|t| lock(t)).collect();
        let tasks = || timelines.iter().flat_map(|t| t.tasks.iter());
        let sched = || timelines.iter().flat_map(|t| t.sched.iter());
        let g = self.graph();
        let us = |ns: u64| ns as f64 / 1000.0;
        let sched_tid = self.lane_names.len() as u32;
        w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
        let mut first = true;
        let mut emit = |e: String| -> std::io::Result<()> {
            if !first {
                w.write_all(b",\n")?;
            }
            first = false;
            w.write_all(e.as_bytes())
        };
        emit(
            r#"{"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"dagrt worker"}}"#
                .into(),
        )?;
        for (i, n) in self.lane_names.iter().enumerate() {
            emit(format!(
                r#"{{"ph":"M","name":"thread_name","pid":1,"tid":{i},"args":{{"name":{}}}}}"#,
                quote(n)
            ))?;
            emit(format!(
                r#"{{"ph":"M","name":"thread_sort_index","pid":1,"tid":{i},"args":{{"sort_index":{i}}}}}"#
            ))?;
        }
        // Scheduler tracks: the scheduler thread's, then one per lane that ran passes, then
        // the submitting thread's if it ran any.
        let sched_track = |by: By| match by {
            By::Scheduler => sched_tid,
            By::Lane(l) => sched_tid + 1 + l,
            By::Submitter => sched_tid + 1 + self.lane_names.len() as u32,
        };
        let tracks: std::collections::BTreeSet<By> = std::iter::once(By::Scheduler)
            .chain(sched().map(|s| s.by))
            .collect();
        for by in tracks {
            let tid = sched_track(by);
            let name = match by {
                By::Scheduler => "scheduler".to_string(),
                By::Lane(l) => format!(
                    "scheduler passes on {}",
                    self.lane_names
                        .get(l as usize)
                        .map_or_else(|| format!("lane {l}"), |n| n.clone())
                ),
                By::Submitter => "scheduler passes on the submitting thread".to_string(),
            };
            emit(format!(
                r#"{{"ph":"M","name":"thread_name","pid":1,"tid":{tid},"args":{{"name":{}}}}}"#,
                quote(&name)
            ))?;
            emit(format!(
                r#"{{"ph":"M","name":"thread_sort_index","pid":1,"tid":{tid},"args":{{"sort_index":{tid}}}}}"#
            ))?;
        }
        // Task slices; remember where member 0 of each task ran for the flow arrows.
        let mut placed = std::collections::HashMap::new();
        for t in tasks() {
            emit(format!(
                r#"{{"ph":"X","cat":"task","name":{},"pid":1,"tid":{},"ts":{:.3},"dur":{:.3},"args":{{"run":{},"slot":{},"member":{},"failed":{}}}}}"#,
                quote(t.name),
                t.lane,
                us(t.t0),
                us(t.t1.saturating_sub(t.t0)),
                t.run,
                t.slot,
                t.member,
                t.failed
            ))?;
            if t.member == 0 {
                placed.insert((t.run, t.slot), (t.lane, t.t0, t.t1));
            }
        }
        for (i, e) in g.edges.iter().enumerate() {
            let (Some(&(pl, _, p1)), Some(&(cl, c0, _))) =
                (placed.get(&(e.run, e.from)), placed.get(&(e.run, e.to)))
            else {
                continue;
            };
            let cat = if e.retain { "dep" } else { "dep_wait" };
            emit(format!(
                r#"{{"ph":"s","cat":"{cat}","name":"dep","id":{i},"pid":1,"tid":{pl},"ts":{:.3}}}"#,
                us(p1.saturating_sub(1))
            ))?;
            emit(format!(
                r#"{{"ph":"f","bp":"e","cat":"{cat}","name":"dep","id":{i},"pid":1,"tid":{cl},"ts":{:.3}}}"#,
                us(c0)
            ))?;
        }
        for s in sched() {
            emit(format!(
                r#"{{"ph":"X","cat":"scheduler","name":"{}","pid":1,"tid":{},"ts":{:.3},"dur":{:.3},"args":{{"count":{}}}}}"#,
                s.name,
                sched_track(s.by),
                us(s.t0),
                us(s.t1.saturating_sub(s.t0)),
                s.count
            ))?;
        }
        w.write_all(b"\n]}\n")
    }

    /// The DAG of `run` as recorded while tracing, in Graphviz DOT.
    pub fn dot(&self, run: RunId) -> Option<String> {
        let b = self.graph();
        // Under the same lock as the text: a recording started meanwhile drops the graph.
        if !b.nodes.iter().any(|n| n.run == run) {
            return None;
        }
        let mut s = format!("digraph \"dagrt_run_{run}\" {{\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n");
        for n in b.nodes.iter().filter(|n| n.run == run) {
            let _ = writeln!(
                s,
                "  t{} [label={}];",
                n.slot,
                dot_quote(&format!("{}\n{} slot {}", shown(n.name), n.kind, n.slot))
            );
        }
        // Edges between recorded nodes only: a producer submitted before the recording
        // started has none.
        let nodes: std::collections::HashSet<SlotId> = b
            .nodes
            .iter()
            .filter(|n| n.run == run)
            .map(|n| n.slot)
            .collect();
        for e in b
            .edges
            .iter()
            .filter(|e| e.run == run && nodes.contains(&e.from) && nodes.contains(&e.to))
        {
            let style = if e.retain { "" } else { " [style=dashed]" };
            let _ = writeln!(s, "  t{} -> t{}{style};", e.from, e.to);
        }
        s.push_str("}\n");
        Some(s)
    }
}

/// `crate::sync::lock` for the std mutexes here (a trace is not part of the loom models, so
/// its locks stay std's under `--cfg loom`).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A JSON string literal (also valid as a DOT quoted string for the characters we emit).
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(q, "\\u{:04x}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// A DOT quoted string: `quote` but for control characters, which DOT has no escape for and
/// Graphviz would print as the text of a JSON escape; a newline stays a line break (the
/// label's own separators: a name's newlines are `shown` first).
fn dot_quote(s: &str) -> String {
    let kept: String = s
        .chars()
        .map(|c| if c.is_control() && c != '\n' { '?' } else { c })
        .collect();
    quote(&kept)
}

/// A callable's name as a DOT label shows it: every control character, newlines too, as '?'.
fn shown(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The trace path for the `k`th worker of the process that takes it from DAGRT_TRACE: the
/// first one records into `path` itself, later ones into `path` with `.k` before the
/// extension (`t.json`, `t.1.json`, ...), so no two workers write one file. In a forked child
/// (`pid`), whose count goes on from its parent's, the process id comes first
/// (`t.pid1234.json`, `t.pid1234.1.json`), so siblings do not share files either.
pub fn env_trace_path(path: PathBuf, k: u32, pid: Option<u32>) -> PathBuf {
    if k == 0 && pid.is_none() {
        return path;
    }
    let stem = path.file_stem().unwrap_or_default().to_os_string();
    let mut name = stem;
    if let Some(pid) = pid {
        name.push(format!(".pid{pid}"));
    }
    if k > 0 {
        name.push(format!(".{k}"));
    }
    if let Some(ext) = path.extension() {
        name.push(".");
        name.push(ext);
    }
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_workers_get_numbered_trace_files() {
        let p = |s: &str, k| env_trace_path(PathBuf::from(s), k, None);
        assert_eq!(p("/tmp/t.json", 0), PathBuf::from("/tmp/t.json"));
        assert_eq!(p("/tmp/t.json", 1), PathBuf::from("/tmp/t.1.json"));
        assert_eq!(p("trace", 2), PathBuf::from("trace.2"));
        assert_eq!(p("a.b/t.x.json", 3), PathBuf::from("a.b/t.x.3.json"));
        let f = |s: &str, k| env_trace_path(PathBuf::from(s), k, Some(77));
        assert_eq!(f("/tmp/t.json", 0), PathBuf::from("/tmp/t.pid77.json"));
        assert_eq!(f("/tmp/t.json", 2), PathBuf::from("/tmp/t.pid77.2.json"));
        assert_eq!(f("trace", 0), PathBuf::from("trace.pid77"));
    }

    /// Whenever the file lock is free, recording is on exactly when a file is open, however
    /// starts and stops from several threads interleave (a stop that cleared the flag before
    /// taking the file could take a racing start's file and leave recording on, fileless).
    #[test]
    fn racing_starts_and_stops_keep_the_flag_with_the_file() {
        let t = Trace::new(vec!["lane 0".into()]);
        let dir = std::env::temp_dir().join(format!("dagrt-trace-race-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    let out = lock(&t.out);
                    assert_eq!(t.enabled.load(Ordering::Acquire), out.is_some());
                }
            });
            let racers: Vec<_> = (0..2)
                .map(|i| {
                    let (t, dir) = (&t, &dir);
                    s.spawn(move || {
                        for _ in 0..300 {
                            let _ = t.start(dir.join(format!("{i}.json")));
                            t.stop().unwrap();
                        }
                    })
                })
                .collect();
            for r in racers {
                r.join().unwrap();
            }
            done.store(true, Ordering::Relaxed);
        });
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dot_labels_have_no_control_characters() {
        assert_eq!(dot_quote("a\x01b\nc\x7f\"d"), "\"a?b\\nc?\\\"d\"");
        // A name's own newline is not a line break of the label.
        assert_eq!(shown("a\nb\tc"), "a?b?c");
    }

    /// A pass run on a lane thread lands on that lane's scheduler track, named after the lane;
    /// one run on the scheduler thread, on its track; one run on any other thread (the
    /// submitting one), on a track of its own, and so does one run by a lane of another
    /// worker (a nested worker's builder), which is not this worker's lane.
    #[test]
    fn scheduler_events_go_to_the_track_of_the_thread_that_ran_them() {
        let t = Trace::new(vec!["SUB lane 0".into(), "SUB lane 1".into()]);
        let other = Trace::new(vec!["outer lane 0".into()]);
        std::thread::scope(|s| {
            s.spawn(|| {
                set_scheduler_thread(&t);
                t.sched("dispatch", 10, 20, 1);
            });
            s.spawn(|| {
                set_lane_thread(&t, 1);
                t.sched("completions", 30, 40, 2);
            });
            s.spawn(|| {
                set_lane_thread(&other, 0);
                t.sched("reclaim", 50, 60, 3);
            });
        });
        t.sched("dispatch", 70, 80, 4);
        let json = t.chrome_json();
        let has = |needle: &str| json.lines().any(|l| l.contains(needle));
        assert!(has(r#""tid":2,"args":{"name":"scheduler"}"#), "{json}");
        assert!(
            has(r#""tid":4,"args":{"name":"scheduler passes on SUB lane 1"}"#),
            "{json}"
        );
        assert!(
            has(r#""tid":5,"args":{"name":"scheduler passes on the submitting thread"}"#),
            "{json}"
        );
        // No track for lane 0: it ran no pass (the other worker's lane 0 did).
        assert!(!has("scheduler passes on SUB lane 0"), "{json}");
        assert!(has(r#""name":"dispatch","pid":1,"tid":2,"#), "{json}");
        assert!(has(r#""name":"completions","pid":1,"tid":4,"#), "{json}");
        assert!(has(r#""name":"reclaim","pid":1,"tid":5,"#), "{json}");
        assert!(has(r#""name":"dispatch","pid":1,"tid":5,"#), "{json}");
    }
}
