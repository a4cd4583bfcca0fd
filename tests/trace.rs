//! The timeline trace is well-formed Chrome trace-event JSON (what Perfetto's JSON loader
//! reads): metadata names every lane, every task is one complete ("X") slice with its callable
//! name, run id and slot, every other event has its ph, ts, pid and tid, flow arrows pair up
//! one to an id and bind to the task slices they join, and the DOT export names every edge.

use dagrt::callable::{register, CallableKind};
use dagrt::orchestrator::SubmitKind;
use dagrt::task::{CallConfig, DataType, Tag, TaskArgs, TaskView, Tensor};
use dagrt::worker::{Worker, WorkerConfig};
use serde_json::Value;
use std::ffi::c_void;

mod common;

unsafe extern "C" fn touch(t: *const TaskView, _u: *mut c_void) -> i32 {
    // SAFETY: the runtime passes a valid view whose tensors point at live u64 buffers.
    unsafe {
        let v = &*t;
        let p = (*v.tensors.add(v.num_tensors as usize - 1)).data as *mut u64;
        *p = p.read_volatile().wrapping_add(1);
    }
    0
}

fn tensor(p: *mut u64, tag: Tag) -> Tensor {
    let mut shape = [0; 5];
    shape[0] = 1;
    Tensor {
        data: p.cast(),
        offset: 0,
        ndim: 1,
        dtype: DataType::U64 as u32,
        tag: tag as u32,
        reserved: 0,
        shape,
        strides: [0; 5],
    }
}

#[test]
fn trace_is_chrome_json_and_dot_names_edges() {
    let dir = std::env::temp_dir().join(format!("dagrt-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.json");
    let mut w = Worker::new(WorkerConfig::default()).unwrap();
    w.add_next_level_lane(5).unwrap();
    w.add_sub_lanes(2).unwrap();
    w.init().unwrap();
    let e = w.engine().unwrap().clone();
    e.trace.start(path.clone()).unwrap();
    let c = touch_callable();
    let mut bufs = vec![0u64; 4];
    let p = bufs.as_mut_ptr();
    let run = {
        let mut o = w.orchestrator().unwrap().lock().unwrap();
        let run = o.begin_run().unwrap();
        // a -> (b, c) -> d over buffers 0..3
        // SAFETY: indices are within the 4-element vector, which outlives the run.
        let (b0, b1, b2, b3) = unsafe { (p, p.add(1), p.add(2), p.add(3)) };
        let mut submit = |kind, ts: &mut [Tensor]| {
            let a = TaskArgs::of_tensors(ts);
            let workers: &[i32] = if kind == SubmitKind::NextLevel {
                &[5]
            } else {
                &[]
            };
            o.submit(kind, &c, &[a], &CallConfig::default(), workers)
                .unwrap()
        };
        submit(SubmitKind::NextLevel, &mut [tensor(b0, Tag::Output)]);
        submit(
            SubmitKind::Sub,
            &mut [tensor(b0, Tag::Input), tensor(b1, Tag::Output)],
        );
        submit(
            SubmitKind::Sub,
            &mut [tensor(b0, Tag::Input), tensor(b2, Tag::Output)],
        );
        submit(
            SubmitKind::NextLevel,
            &mut [
                tensor(b1, Tag::Input),
                tensor(b2, Tag::Input),
                tensor(b3, Tag::Output),
            ],
        );
        o.close_run_submission(run).unwrap();
        run
    };
    assert!(e.runs.get(run).unwrap().wait(None));
    let dot = e.trace.dot(run).expect("a graph was recorded");
    e.trace.stop().unwrap();

    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).expect("valid JSON");
    let evs = v["traceEvents"].as_array().expect("traceEvents array");
    let names: Vec<&str> = evs
        .iter()
        .filter(|x| x["ph"] == "M" && x["name"] == "thread_name")
        .map(|x| x["args"]["name"].as_str().unwrap())
        .collect();
    assert!(names.iter().any(|n| n.contains("NEXT_LEVEL worker 5")));
    let lane_tracks = || names.iter().filter(|n| !n.starts_with("scheduler"));
    assert_eq!(lane_tracks().filter(|n| n.contains("SUB")).count(), 2);
    assert_eq!(lane_tracks().count(), 3);
    assert!(names.contains(&"scheduler"));
    let tasks: Vec<&Value> = evs
        .iter()
        .filter(|x| x["ph"] == "X" && x["cat"] == "task")
        .collect();
    assert_eq!(tasks.len(), 4, "one slice per task");
    for t in &tasks {
        assert_eq!(t["name"], "trace.touch");
        assert!(t["ts"].as_f64().unwrap() >= 0.0 && t["dur"].as_f64().unwrap() >= 0.0);
        assert_eq!(t["args"]["run"].as_u64().unwrap(), run);
        assert!(t["args"]["slot"].is_u64());
        assert!(t["pid"].is_u64() && t["tid"].is_u64());
    }
    // the NEXT_LEVEL tasks ran on lane 0 (worker id 5)
    let first = tasks
        .iter()
        .min_by(|a, b| a["ts"].as_f64().partial_cmp(&b["ts"].as_f64()).unwrap())
        .unwrap();
    assert_eq!(first["tid"], 0);
    let starts: Vec<&Value> = evs.iter().filter(|x| x["ph"] == "s").collect();
    let finishes: Vec<&Value> = evs.iter().filter(|x| x["ph"] == "f").collect();
    assert_eq!(starts.len(), 4, "edges a->b, a->c, b->d, c->d");
    assert_eq!(finishes.len(), 4);
    let problems = trace_problems(evs);
    assert!(problems.is_empty(), "{problems:#?}");
    // Scheduler events sit on the track of the thread that ran the pass: the scheduler
    // thread's, or one per lane that took the role after a completion.
    let track_name = |tid: &Value| {
        evs.iter()
            .find(|x| x["ph"] == "M" && x["name"] == "thread_name" && x["tid"] == *tid)
            .and_then(|x| x["args"]["name"].as_str())
    };
    let sched: Vec<&Value> = evs.iter().filter(|x| x["cat"] == "scheduler").collect();
    assert!(!sched.is_empty());
    for s in &sched {
        let name = track_name(&s["tid"]).expect("a named track");
        assert!(
            name == "scheduler" || name.starts_with("scheduler passes on "),
            "{name}"
        );
    }
    assert_eq!(dot.matches(" -> ").count(), 4, "{dot}");
    assert!(dot.starts_with("digraph"));
    drop(w);
    assert_eq!(bufs, vec![1, 1, 1, 1]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// What is wrong with a trace's events, as Perfetto's JSON loader would read them: every event
/// but metadata has `ph`, and numeric `ts`, `pid` and `tid`; each flow id has exactly one "s"
/// and one "f", the "f" no earlier than the "s" and binding to its enclosing slice (`bp` "e");
/// and every flow event lies inside a task slice of its own track, or the arrow binds to no
/// task (the loader attaches a flow event to the slice around it on its track). Timestamps are
/// printed to the nanosecond: 2 ns of slack.
fn trace_problems(evs: &[Value]) -> Vec<String> {
    let mut bad = Vec::new();
    let num = |e: &Value, k: &str| e[k].as_f64().filter(|_| e[k].is_number());
    for e in evs.iter().filter(|e| e["ph"] != "M") {
        if !e["ph"].is_string() {
            bad.push(format!("no ph: {e}"));
        }
        for k in ["ts", "pid", "tid"] {
            if num(e, k).is_none() {
                bad.push(format!("no numeric {k}: {e}"));
            }
        }
    }
    // (pid, tid) -> the task slices' [start, end] on that track.
    let mut slices: std::collections::HashMap<(u64, u64), Vec<(f64, f64)>> = Default::default();
    for e in evs.iter().filter(|e| e["ph"] == "X" && e["cat"] == "task") {
        if let (Some(pid), Some(tid), Some(ts), Some(dur)) = (
            e["pid"].as_u64(),
            e["tid"].as_u64(),
            num(e, "ts"),
            num(e, "dur"),
        ) {
            slices.entry((pid, tid)).or_default().push((ts, ts + dur));
        }
    }
    let mut flows: std::collections::BTreeMap<String, (Vec<&Value>, Vec<&Value>)> =
        Default::default();
    for e in evs.iter().filter(|e| e["ph"] == "s" || e["ph"] == "f") {
        let ends = flows.entry(e["id"].to_string()).or_default();
        if e["ph"] == "s" {
            &mut ends.0
        } else {
            &mut ends.1
        }
        .push(e);
        let inside = match (e["pid"].as_u64(), e["tid"].as_u64(), num(e, "ts")) {
            (Some(pid), Some(tid), Some(t)) => slices
                .get(&(pid, tid))
                .is_some_and(|iv| iv.iter().any(|&(a, b)| a - 0.002 <= t && t <= b + 0.002)),
            _ => false,
        };
        if !inside {
            bad.push(format!(
                "flow event outside every task slice of its track: {e}"
            ));
        }
    }
    for (id, (s, f)) in &flows {
        if s.len() != 1 || f.len() != 1 {
            bad.push(format!(
                "flow id {id}: {} \"s\" and {} \"f\" events",
                s.len(),
                f.len()
            ));
            continue;
        }
        if num(f[0], "ts") < num(s[0], "ts") {
            bad.push(format!(
                "flow id {id} goes back in time: {} then {}",
                s[0], f[0]
            ));
        }
        if f[0]["bp"] != "e" {
            bad.push(format!("flow id {id} ends without bp \"e\": {}", f[0]));
        }
    }
    bad
}

/// `trace_problems` finds each defect it looks for in an otherwise good trace: a flow id used
/// twice, an arrow end moved off its task slice (in time, or onto another track), and an event
/// that lost `ph`, `ts`, `pid` or `tid`.
#[test]
fn trace_problems_catches_broken_flows_and_fields() {
    let path = scratch("broken.json");
    let (w, c) = traced(2, &path);
    let e = w.engine().unwrap().clone();
    let mut b = [0u64; 2];
    let run = {
        let mut o = w.orchestrator().unwrap().lock().unwrap();
        let run = o.begin_run().unwrap();
        for _ in 0..4 {
            sub(&mut o, &c, &mut [tensor(&mut b[0], Tag::Inout)]);
        }
        sub(
            &mut o,
            &c,
            &mut [
                tensor(&mut b[0], Tag::Input),
                tensor(&mut b[1], Tag::Output),
            ],
        );
        o.close_run_submission(run).unwrap();
        run
    };
    assert!(e.runs.get(run).unwrap().wait(None));
    e.trace.stop().unwrap();
    drop(w);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let good = v["traceEvents"].as_array().unwrap().clone();
    assert!(
        trace_problems(&good).is_empty(),
        "{:#?}",
        trace_problems(&good)
    );
    let at = |ph: &str| good.iter().position(|e| e["ph"] == ph).unwrap();
    let (s, f) = (at("s"), at("f"));
    let task = good.iter().position(|e| e["cat"] == "task").unwrap();
    let sched = good.iter().position(|e| e["cat"] == "scheduler").unwrap();
    let no_task_tid = good.iter().filter_map(|e| e["tid"].as_u64()).max().unwrap() + 1;
    type Edit = Box<dyn Fn(&mut Vec<Value>)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "an id used by two arrows",
            Box::new(move |t| {
                let (s2, f2) = (t[s].clone(), t[f].clone());
                t.push(s2);
                t.push(f2);
            }),
            "2 \"s\" and 2 \"f\"",
        ),
        (
            "an arrow end after its task",
            Box::new(move |t| {
                let ts = t[f]["ts"].as_f64().unwrap();
                t[f]["ts"] = serde_json::json!(ts + 1e7);
            }),
            "outside every task slice",
        ),
        (
            "an arrow start on a track without tasks",
            Box::new(move |t| t[s]["tid"] = serde_json::json!(no_task_tid)),
            "outside every task slice",
        ),
        (
            "a task slice without pid",
            Box::new(move |t| {
                t[task].as_object_mut().unwrap().remove("pid");
            }),
            "no numeric pid",
        ),
        (
            "a scheduler slice without ts",
            Box::new(move |t| {
                t[sched].as_object_mut().unwrap().remove("ts");
            }),
            "no numeric ts",
        ),
        (
            "a flow event with a string tid",
            Box::new(move |t| t[f]["tid"] = serde_json::json!("0")),
            "no numeric tid",
        ),
        (
            "a task slice without ph",
            Box::new(move |t| {
                t[task].as_object_mut().unwrap().remove("ph");
            }),
            "no ph",
        ),
    ];
    for (what, edit, want) in cases {
        let mut t = good.clone();
        edit(&mut t);
        let problems = trace_problems(&t);
        assert!(
            problems.iter().any(|p| p.contains(want)),
            "{what}: no \"{want}\" in {problems:#?}"
        );
    }
}

fn touch_callable() -> dagrt::callable::Callable {
    register(
        "trace.touch",
        7,
        CallableKind::Task as u32,
        touch,
        std::ptr::null_mut(),
    )
    .unwrap()
}

fn sub_worker(lanes: u32) -> (Worker, dagrt::callable::Callable) {
    common::sub_worker(WorkerConfig::default(), lanes, "trace.touch", touch)
}

/// A file in a directory of the test's own (tests of one binary may run side by side).
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dagrt-trace-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn sub(
    o: &mut dagrt::orchestrator::Orchestrator,
    c: &dagrt::callable::Callable,
    ts: &mut [Tensor],
) {
    let a = TaskArgs::of_tensors(ts);
    o.submit(SubmitKind::Sub, c, &[a], &CallConfig::default(), &[])
        .unwrap();
}

/// A pass's scheduler slices do not overlap on its track: "dispatch" ends where the pass's
/// "reclaim" begins (it once ran on over the reclaim, which then counted twice).
#[test]
fn a_pass_slices_do_not_overlap() {
    let path = scratch("passes.json");
    let (w, c) = traced(2, &path);
    let e = w.engine().unwrap().clone();
    let mut buf = [0u64; 8];
    let p = buf.as_mut_ptr();
    for _ in 0..5 {
        let mut o = w.orchestrator().unwrap().lock().unwrap();
        let run = o.begin_run().unwrap();
        for i in 0..400 {
            // SAFETY: in bounds; the array outlives the run.
            sub(
                &mut o,
                &c,
                &mut [tensor(unsafe { p.add(i % 8) }, Tag::Inout)],
            );
        }
        o.close_run_submission(run).unwrap();
        drop(o);
        assert!(e.runs.get(run).unwrap().wait(None));
    }
    e.trace.stop().unwrap();
    drop(w);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let sched: Vec<(u64, f64, f64, String)> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["cat"] == "scheduler")
        .map(|x| {
            let t = x["ts"].as_f64().unwrap();
            let name = x["name"].as_str().unwrap().to_string();
            (
                x["tid"].as_u64().unwrap(),
                t,
                t + x["dur"].as_f64().unwrap(),
                name,
            )
        })
        .collect();
    assert!(sched.iter().any(|s| s.3 == "reclaim"), "no reclaim slice");
    for a in sched.iter().filter(|s| s.3 == "reclaim") {
        for d in sched.iter().filter(|s| s.3 == "dispatch" && s.0 == a.0) {
            // Timestamps are printed to the nanosecond: a shared end point is not overlap.
            assert!(
                a.2 <= d.1 + 0.001 || d.2 <= a.1 + 0.001,
                "reclaim {a:?} overlaps dispatch {d:?}"
            );
        }
    }
    assert_eq!(buf.iter().sum::<u64>(), 2000);
}

/// Every edge of the DOT export joins two nodes it declares: an `alloc` buffer's synthetic
/// task is a node, and a producer submitted before the recording started leaves its edge out.
#[test]
fn dot_edges_join_declared_nodes() {
    let (w, c) = sub_worker(1);
    let e = w.engine().unwrap().clone();
    let mut out = [0u64; 2];
    let run = {
        let mut o = w.orchestrator().unwrap().lock().unwrap();
        let run = o.begin_run().unwrap();
        sub(&mut o, &c, &mut [tensor(&mut out[1], Tag::Inout)]);
        e.trace.start(scratch("dot.json")).unwrap();
        sub(&mut o, &c, &mut [tensor(&mut out[1], Tag::Inout)]);
        let (b, _) = o.alloc(&[1], DataType::U64 as u32).unwrap();
        sub(
            &mut o,
            &c,
            &mut [
                tensor(b.cast(), Tag::Input),
                tensor(&mut out[0], Tag::Output),
            ],
        );
        o.close_run_submission(run).unwrap();
        run
    };
    assert!(e.runs.get(run).unwrap().wait(None));
    let dot = e.trace.dot(run).expect("a graph was recorded");
    e.trace.stop().unwrap();
    drop(w);
    let mut declared = std::collections::HashSet::new();
    let mut edges = Vec::new();
    for l in dot.lines().map(str::trim) {
        if let Some((a, b)) = l.split_once(" -> ") {
            edges.push((a.to_string(), b.trim_end_matches(';').to_string()));
        } else if let Some((n, _)) = l.split_once(" [label=") {
            declared.insert(n.to_string());
        }
    }
    assert_eq!(declared.len(), 3, "two traced tasks and the alloc:\n{dot}");
    assert_eq!(edges.len(), 1, "the alloc's edge only:\n{dot}");
    for (a, b) in &edges {
        assert!(
            declared.contains(a) && declared.contains(b),
            "{a} -> {b}:\n{dot}"
        );
    }
    assert!(dot.contains("alloc"), "{dot}");
}

/// A worker of `lanes` SUB lanes recording into `path`.
fn traced(lanes: u32, path: &std::path::Path) -> (Worker, dagrt::callable::Callable) {
    let (w, c) = sub_worker(lanes);
    w.engine().unwrap().trace.start(path.to_path_buf()).unwrap();
    (w, c)
}

/// One run of one task on a worker from `traced`, then the recording's stop.
fn one_task_then_stop(w: &Worker, c: &dagrt::callable::Callable) {
    let e = w.engine().unwrap().clone();
    let mut b = [0u64; 1];
    let mut o = w.orchestrator().unwrap().lock().unwrap();
    let run = o.begin_run().unwrap();
    sub(&mut o, c, &mut [tensor(&mut b[0], Tag::Inout)]);
    o.close_run_submission(run).unwrap();
    drop(o);
    assert!(e.runs.get(run).unwrap().wait(None));
    e.trace.stop().unwrap();
}

/// The file holds one whole document also when something else wrote into it meanwhile (two
/// processes recording into one path): it is written under another name and renamed.
#[test]
fn the_file_is_one_whole_document() {
    let path = scratch("whole.json");
    let (w, c) = traced(1, &path);
    std::fs::write(&path, vec![b'x'; 1 << 20]).unwrap();
    one_task_then_stop(&w, &c);
    drop(w);
    let text = std::fs::read_to_string(&path).unwrap();
    let v: Value = serde_json::from_str(&text).expect("one whole JSON document");
    assert!(v["traceEvents"].as_array().unwrap().len() > 1);
    let dir = path.parent().unwrap();
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|d| d.ok())
        .filter(|d| d.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

/// A path that is no regular file (a pipe here) is written directly, with no temporary file
/// beside it: the reader gets one whole document.
#[test]
fn a_pipe_gets_the_document_directly() {
    let path = scratch("pipe.json");
    let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(cpath.as_ptr(), 0o600) }, 0, "mkfifo");
    let reader = {
        let path = path.clone();
        std::thread::spawn(move || std::fs::read_to_string(path).unwrap())
    };
    let (w, c) = traced(1, &path);
    one_task_then_stop(&w, &c);
    drop(w);
    let text = reader.join().unwrap();
    let v: Value = serde_json::from_str(&text).expect("one whole JSON document");
    assert!(v["traceEvents"].as_array().unwrap().len() > 1);
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter_map(|d| Some(d.ok()?.file_name().to_string_lossy().into_owned()))
        .collect();
    assert_eq!(names, vec!["pipe.json".to_string()], "only the pipe");
}

/// Two workers of one process recording into one path: each stop leaves one whole document
/// (the last one's), neither fails, and no temporary file is left.
#[test]
fn two_recordings_into_one_path() {
    let path = scratch("shared.json");
    let (w1, c1) = traced(1, &path);
    let (w2, c2) = traced(1, &path);
    one_task_then_stop(&w1, &c1);
    let first: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(first["traceEvents"].as_array().unwrap().len() > 1);
    one_task_then_stop(&w2, &c2);
    drop((w1, w2));
    let text = std::fs::read_to_string(&path).unwrap();
    let v: Value = serde_json::from_str(&text).expect("one whole JSON document");
    assert!(v["traceEvents"].as_array().unwrap().len() > 1);
    let left: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter_map(|d| Some(d.ok()?.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

/// A symlink stays a link: the trace goes to its target.
#[test]
fn a_symlink_stays_a_link_to_the_trace() {
    let real = scratch("real.json");
    let link = real.with_file_name("link.json");
    std::fs::write(&real, b"old").unwrap();
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    let (w, c) = traced(1, &link);
    one_task_then_stop(&w, &c);
    drop(w);
    assert!(
        std::fs::symlink_metadata(&link).unwrap().is_symlink(),
        "the link was replaced"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap())
        .expect("the target holds the trace");
    assert!(v["traceEvents"].as_array().unwrap().len() > 1);
}
