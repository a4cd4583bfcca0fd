//! The comparison scripts behind `scripts/bench.sh` on made-up results, where the right answer
//! is known: `bench_compare.py` (medians over rounds, dagrt / best peer overall and per round,
//! the host probe's mixed and slow rounds, summary.json) and `bench_pairs.py` (the median and quartiles
//! of per-pair ratios, each against that pair's best peer). Needs python3 (command 2's machine
//! has it).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dagrt-bench-scripts-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn python(script: &str, args: &[&Path], extra: &[&str]) -> String {
    let out = Command::new("python3")
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("scripts")
                .join(script),
        )
        .args(args)
        .args(extra)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// One line of the workloads bench's output (the submitting thread's CPU 20 ns a task under
/// the median, a lane's 50).
fn dagrt_line(w: &str, kind: &str, median: f64) -> String {
    serde_json::json!({
        "workload": w, "lanes": 2, "lane_kind": kind, "threads": 4, "tasks": 100000,
        "window": 131072, "reps": 5, "ns_per_task_median": median,
        "ns_per_task_min": median - 10.0, "ns_per_task_max": median + 10.0,
        "submit_ns_per_task_median": median - 5.0, "samples_ns": [],
        "cpu_ns_per_task": {"submit": median - 20.0, "lane-0": 50.0},
        "runqueue_wait_ns_per_task": {"submit": 1.0, "lane-0": 2.0},
        "cpu_total_ns_per_task": median + 30.0,
    })
    .to_string()
}

/// One tagged W1 measurement, as `tag_lines.py` writes it: round (pair) `p`, runtime `who`.
fn tagged(p: usize, who: &str, ns: f64) -> String {
    serde_json::json!({"pair": p, "workload": "W1", "who": who, "ns_per_task_median": ns})
        .to_string()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn compare_takes_medians_over_rounds_and_marks_mixed_rounds() {
    let d = scratch("compare");
    // Round 1: dagrt 100 (sub; next is slower), OpenMP 200, TBB 250 -> 0.50.
    // Round 2: dagrt 120, OpenMP 300, TBB 150 -> 0.80.
    // Round 3: dagrt 110, OpenMP 220, TBB 400 -> 0.50.
    let rounds = [
        (100.0, 200.0, 250.0),
        (120.0, 300.0, 150.0),
        (110.0, 220.0, 400.0),
    ];
    for (i, &(ours, omp, tbb)) in rounds.iter().enumerate() {
        let r = i + 1;
        let lines = [
            dagrt_line("W1", "sub", ours),
            dagrt_line("W1", "next", ours * 2.0),
        ];
        std::fs::write(d.join(format!("dagrt.r{r}.jsonl")), lines.join("\n") + "\n").unwrap();
        let peers = format!(
            "# peer workload N ns\nomp-t2 W1 100000 {omp}\ntbb-t2 W1 100000 {tbb}\n\
             omp-t1 W1 100000 1\nphys atomic_pingpong_oneway 1 30\n"
        );
        std::fs::write(d.join(format!("peers.r{r}.txt")), peers).unwrap();
    }
    // Round 2's peers half ends in a slow phase (2.9x the fastest probe), its dagrt half runs in
    // a fast one: mixed. Round 3 runs wholly in a slow phase: its halves compare alike.
    std::fs::write(
        d.join("host.txt"),
        "r1.dagrt before 55.0\nr1.dagrt after 54.5\nr1.peers before 55.1\nr1.peers after 54.9\n\
         r2.peers before 55.0\nr2.peers after 160.2\nr2.dagrt before 54.6\nr2.dagrt after 54.4\n\
         r3.dagrt before 150.8\nr3.dagrt after 155.2\nr3.peers before 154.7\nr3.peers after 149.0\n\
         pairs before 54.0\n",
    )
    .unwrap();
    let table = python("bench_compare.py", &[&d], &[]);
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap()).unwrap();
    let w1 = &s["workloads"]["W1"];
    assert_eq!(w1["dagrt_best_kind"], "sub", "{table}");
    assert!(close(w1["dagrt_best"].as_f64().unwrap(), 110.0), "{w1}");
    // Medians over rounds: OpenMP 220, TBB 250; the -t1 peer is not compared at 2 lanes.
    assert_eq!(w1["best_peer"], "omp-t2", "{w1}");
    assert!(
        close(w1["ratio_dagrt_over_best_peer"].as_f64().unwrap(), 0.5),
        "{w1}"
    );
    let per_round: Vec<f64> = w1["ratio_per_round"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(per_round.len(), 3, "{w1}");
    for (got, want) in per_round.iter().zip([0.5, 0.8, 0.5]) {
        assert!(close(*got, want), "per round {per_round:?}");
    }
    assert!(table.contains("0.50/0.80/0.50"), "{table}");
    // The submitting thread's CPU, as medians over rounds (80, 100, 90), for the best kind.
    let sub = s["dagrt_all"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["lane_kind"] == "sub")
        .unwrap();
    assert!(
        close(sub["cpu_ns_per_task"]["submit"].as_f64().unwrap(), 90.0),
        "{sub}"
    );
    assert!(
        close(sub["cpu_total_ns_per_task"].as_f64().unwrap(), 140.0),
        "{sub}"
    );
    assert!(
        table.contains("every submit runs on it): W1 90 (sub)"),
        "{table}"
    );
    // The mixed round, and only it, is marked so; the slow one is marked slow.
    let marked: Vec<&str> = table.lines().filter(|l| l.contains("mixed")).collect();
    assert_eq!(marked.len(), 1, "{table}");
    assert!(marked[0].trim_start().starts_with("round 2:"), "{table}");
    let slow: Vec<&str> = table.lines().filter(|l| l.contains("<- slow")).collect();
    assert_eq!(slow.len(), 1, "{table}");
    assert!(slow[0].trim_start().starts_with("round 3:"), "{table}");
    assert!(close(
        s["host_probe_ms"]["r2.peers"]["after"].as_f64().unwrap(),
        160.2
    ));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn pairs_take_the_median_of_per_pair_ratios_against_each_pairs_best_peer() {
    let d = scratch("pairs");
    let mut lines = Vec::new();
    // Per pair: dagrt sub, dagrt next (slower throughout), TBB, OpenMP.
    let pairs = [
        (100.0, 200.0, 400.0),
        (150.0, 300.0, 100.0),
        (120.0, 240.0, 480.0),
        (90.0, 450.0, 180.0),
    ];
    // The floor on 1 lane runs at a tenth of dagrt's sub, on 2 at a fifth: 1 lane is its best,
    // and never counts as a peer (nor as dagrt).
    for (p, &(sub, tbb, omp)) in pairs.iter().enumerate() {
        for (who, v) in [
            ("dagrt-sub", sub),
            ("dagrt-next", sub * 3.0),
            ("tbb-t2", tbb),
            ("omp-t2", omp),
            ("floor-l1", sub / 10.0),
            ("floor-l2", sub / 5.0),
        ] {
            lines.push(tagged(p, who, v));
        }
    }
    let path = d.join("pairs.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let rows: Value = serde_json::from_str(&python("bench_pairs.py", &[&path], &["--json"]))
        .expect("--json output");
    let r = &rows[0];
    assert_eq!(r["dagrt_kind"], "sub", "{r}");
    assert_eq!(r["pairs"], 4, "{r}");
    // Ratios against each pair's best peer: 100/200, 150/100, 120/240, 90/180.
    assert!(close(r["ratio_median"].as_f64().unwrap(), 0.5), "{r}");
    assert!(close(r["ratio_min"].as_f64().unwrap(), 0.5), "{r}");
    assert!(close(r["ratio_max"].as_f64().unwrap(), 1.5), "{r}");
    assert_eq!(r["best_peer_counts"]["tbb-t2"], 2, "{r}");
    assert_eq!(r["best_peer_counts"]["omp-t2"], 2, "{r}");
    assert_eq!(r["floor_lanes"], 1, "{r}");
    // 10 / 15 / 12 / 9 ns: median 11; ratios a tenth of dagrt's.
    assert!(close(r["floor_ns_median"].as_f64().unwrap(), 11.0), "{r}");
    assert!(
        close(r["floor_ratio_median"].as_f64().unwrap(), 0.05),
        "{r}"
    );
    let text = python("bench_pairs.py", &[&path], &[]);
    assert!(text.contains("the floor"), "{text}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Two made-up callgrind outputs in `d` (3 reps, 1 rep) of this test binary's object, with
/// `events` and the cost lines given.
fn cg_files(d: &Path, events: &str, reps3: &str, reps1: &str) -> (PathBuf, PathBuf) {
    let exe = std::env::current_exe().unwrap();
    let head = format!(
        "# callgrind format\nversion: 1\npositions: instr line\nevents: {events}\n\
         ob=(1) {}\nfl=(1) x.rs\nfn=(1) f\n",
        exe.display()
    );
    let (f3, f1) = (d.join("cg.3"), d.join("cg.1"));
    std::fs::write(&f3, format!("{head}{reps3}")).unwrap();
    std::fs::write(&f1, format!("{head}{reps1}")).unwrap();
    (f3, f1)
}

/// `cg_lines.py` on two made-up callgrind outputs: addresses relative to the previous one, a
/// call's inclusive cost that is not the address's own, another object's costs, and the
/// 1-rep file's costs taken off the 3-rep file's. (The addresses resolve to nothing in the
/// test binary, so only the total is checked; addr2line comes with gcc's binutils.)
#[test]
fn cg_lines_counts_own_costs_of_the_executable_per_task() {
    let d = scratch("cg");
    let exe = std::env::current_exe().unwrap();
    let other = "ob=(2) /lib/elsewhere.so\nfn=(2) g\n0x10 1 500\n";
    // Own: 30 at 0x10, 20 at 0x12, 7 at 0x16; the 1000 at 0x15 is a call's.
    let reps3 = format!("0x10 1 30\n+2 * 20\ncalls=1 0x50 5\n+3 * 1000\n+1 * 7\n{other}");
    let reps1 = format!("0x10 1 10\n{other}");
    let (f3, f1) = cg_files(&d, "Ir", &reps3, &reps1);
    let out = python("cg_lines.py", &[exe.as_path(), &f3, &f1], &["2"]);
    // (30 - 10 + 20 + 7) / 2 tasks.
    assert!(
        out.starts_with("own instructions per task, all statements: 23.5\n"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// `cg_lines.py` counting other events than Ir: the named columns of the `events:` line are
/// summed (here the last-level misses of a cache-simulated run), a cost line that leaves out
/// its trailing zero events counts them as zero, and an event the file does not have is
/// refused with its name.
#[test]
fn cg_lines_sums_the_named_events() {
    let d = scratch("cg_events");
    let exe = std::env::current_exe().unwrap();
    // DLmr + DLmw: 3 + 4 at 0x10, 2 + 0 at 0x12 (DLmw left out), nothing at 0x14.
    let reps3 = "0x10 1 30 9 3 4\n+2 * 20 5 2\n+2 * 10\n";
    let (f3, f1) = cg_files(&d, "Ir Dr DLmr DLmw", reps3, "0x10 1 10 3 1 1\n");
    let args = [exe.as_path(), &f3, &f1];
    let out = python("cg_lines.py", &args, &["2", "", "DLmr+DLmw"]);
    // (3 + 4 - 1 - 1 + 2) / 2 tasks.
    assert!(
        out.starts_with("own DLmr+DLmw per task, all statements: 3.5\n"),
        "{out}"
    );
    let out = python("cg_lines.py", &args, &["2", "", "Ir"]);
    // (30 - 10 + 20 + 10) / 2.
    assert!(
        out.starts_with("own instructions per task, all statements: 25.0\n"),
        "{out}"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/cg_lines.py");
    let bad = Command::new("python3")
        .arg(script)
        .args(args)
        .args(["2", "", "D1mr"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("no event D1mr"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// `tag_lines.py` turns a JSON bench line and a peer line into tagged objects (the WHO format
/// filled from the JSON's fields), drops anything else; `floor_ladder.py` takes medians over
/// rounds and, for the floor and dagrt only, the median of the per-round ratios to that round's
/// best peer.
#[test]
fn ladder_tags_lines_and_takes_ratios_to_each_rounds_best_peer() {
    let d = scratch("ladder");
    let raw = d.join("raw.txt");
    std::fs::write(
        &raw,
        "{\"workload\": \"W1\", \"lanes\": 2, \"ns_per_task_median\": 50.0}\n\
         tbb-t2 W1 100000 200.0\nphys spsc_ring_per_item\n",
    )
    .unwrap();
    let out = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/tag_lines.py"))
        .args(["1", "floor-l{lanes}"])
        .stdin(std::fs::File::open(&raw).unwrap())
        .output()
        .expect("python3 runs");
    assert!(out.status.success());
    let objs: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objs.len(), 2, "{objs:?}");
    assert_eq!(objs[0]["who"], "floor-l2");
    assert_eq!(objs[0]["pair"], 1);
    assert_eq!(objs[1]["who"], "tbb-t2");
    assert!(close(
        objs[1]["ns_per_task_median"].as_f64().unwrap(),
        200.0
    ));

    // Per round: floor-bare, dagrt-sub, TBB, OpenMP. Best peer 150, 100, 100.
    let rounds = [
        (50.0, 300.0, 200.0, 150.0),
        (60.0, 310.0, 100.0, 300.0),
        (70.0, 320.0, 400.0, 100.0),
    ];
    let mut lines = Vec::new();
    for (r, &(bare, dagrt, tbb, omp)) in rounds.iter().enumerate() {
        for (who, v) in [
            ("floor-bare", bare),
            ("dagrt-sub", dagrt),
            ("tbb-t2", tbb),
            ("omp-t2", omp),
        ] {
            lines.push(tagged(r, who, v));
        }
    }
    let path = d.join("ladder.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let rows: Value = serde_json::from_str(&python("floor_ladder.py", &[&path], &["--json"]))
        .expect("--json output");
    let r = &rows[0];
    let ns = |who: &str| r["ns_median"][who].as_f64().unwrap();
    assert!(
        close(ns("floor-bare"), 60.0) && close(ns("dagrt-sub"), 310.0),
        "{r}"
    );
    assert!(
        close(ns("tbb-t2"), 200.0) && close(ns("omp-t2"), 150.0),
        "{r}"
    );
    // floor: 50/150, 60/100, 70/100 -> 0.6; dagrt: 2.0, 3.1, 3.2 -> 3.1; peers get none.
    let ratio = |who: &str| r["ratio_median"][who].as_f64().unwrap();
    assert!(close(ratio("floor-bare"), 0.6), "{r}");
    assert!(close(ratio("dagrt-sub"), 3.1), "{r}");
    assert!(r["ratio_median"].get("tbb-t2").is_none(), "{r}");
    let text = python("floor_ladder.py", &[&path], &[]);
    assert!(text.contains("bare") && text.contains("0.60"), "{text}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A workload whose dagrt and peer figures come from different task counts (a `--n` passed to
/// the bench) is flagged, in the table and in summary.json; matching counts are not.
#[test]
fn compare_flags_different_task_counts() {
    let d = scratch("compare-tasks");
    let mut small = dagrt_line("W1", "sub", 100.0);
    small = small.replace("\"tasks\":100000", "\"tasks\":1000");
    let lines = [small, dagrt_line("W2", "sub", 100.0)];
    std::fs::write(d.join("dagrt.r1.jsonl"), lines.join("\n") + "\n").unwrap();
    std::fs::write(
        d.join("peers.r1.txt"),
        "tbb-t2 W1 100000 200\ntbb-t2 W2 100000 200\n",
    )
    .unwrap();
    let table = python("bench_compare.py", &[&d], &[]);
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        s["workloads"]["W1"]["task_counts_differ"],
        serde_json::json!(["1000", "100000"]),
        "{table}"
    );
    assert!(
        s["workloads"]["W2"].get("task_counts_differ").is_none(),
        "{table}"
    );
    assert!(
        table.contains("WARNING: W1's figures come from different task counts (1000, 100000)"),
        "{table}"
    );
    assert!(!table.contains("WARNING: W2"), "{table}");
}

/// A peer missing from some round (its run died, or its line was lost) has its median taken
/// over the rounds it has, which can make it the best peer: the table names the peer, the
/// workload and the rounds, and summary.json lists them; a peer present throughout is not named.
#[test]
fn compare_warns_of_a_peer_missing_from_rounds() {
    let d = scratch("compare-missing");
    // TBB's W1 only in rounds 1 and 3 (its 300 of round 2 would have made OpenMP the best).
    for (r, tbb_w1) in [
        (1, "tbb-t2 W1 100000 150\n"),
        (2, ""),
        (3, "tbb-t2 W1 100000 160\n"),
    ] {
        std::fs::write(
            d.join(format!("dagrt.r{r}.jsonl")),
            dagrt_line("W1", "sub", 100.0) + "\n" + &dagrt_line("W2", "sub", 100.0) + "\n",
        )
        .unwrap();
        std::fs::write(
            d.join(format!("peers.r{r}.txt")),
            format!("omp-t2 W1 100000 200\n{tbb_w1}omp-t2 W2 100000 200\ntbb-t2 W2 100000 210\n"),
        )
        .unwrap();
    }
    let table = python("bench_compare.py", &[&d], &[]);
    assert!(
        table.contains(
            "WARNING: tbb-t2 has no W1 figure in round 2: its median is over 2 of 3 rounds"
        ),
        "{table}"
    );
    assert_eq!(
        table.lines().filter(|l| l.contains("has no")).count(),
        1,
        "{table}"
    );
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        s["workloads"]["W1"]["peer_rounds_missing"],
        serde_json::json!({"tbb-t2": [2]}),
        "{table}"
    );
    assert!(
        s["workloads"]["W2"].get("peer_rounds_missing").is_none(),
        "{table}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// `bench_compare.py --chol` on a chol.txt holding `text`.
fn chol_table(name: &str, text: &str) -> String {
    let d = scratch(name);
    let path = d.join("chol.txt");
    std::fs::write(&path, text).unwrap();
    let table = python("bench_compare.py", &[], &["--chol", path.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&d);
    table
}

/// The tiled Cholesky table (`bench_compare.py --chol`, on bench.sh's chol.txt) takes only the
/// reps whose check passed: a peer prints its result line, residual included, before it exits
/// 2 on a failed check, so a rep bench.sh marked FAILED and a line whose residual is not below
/// 1e-12 (nan for a failed run) are left out of the medians and listed, per runtime and size,
/// with the reason.
#[test]
fn chol_table_drops_failed_reps_and_says_which() {
    let table = chol_table(
        "chol",
        "# round 1\n\
         dagrt-sub-t2 2048 128 816 0.050 60.00 2.512e-16\n\
         omp-tiled-t2 2048 128 816 0.045 50.00 2.512e-16\n\
         # FAILED starpu 2048 128 exit 2: starpu-tiled-t2 2048 128 816 0.040 90.00 3.100e-05\n\
         lapack-dpotrf-t2 2048 2048 1 0.060 47.00 1.469e-16\n\
         # round 2\n\
         dagrt-sub-t2 2048 128 816 0.040 99.00 nan\n\
         omp-tiled-t2 2048 128 816 0.045 52.00 2.512e-16\n\
         starpu-tiled-t2 2048 128 816 0.048 40.00 2.512e-16\n\
         # FAILED dagrt 4096 256 exit 1\n\
         # FAILED omp 2048 128 exit 127\n\
         omp-tiled-t2 4096 256 816 0.500 45.00 2.512e-16\n",
    );
    let row = |p: &str| {
        table
            .lines()
            .find(|l| l.starts_with(p))
            .unwrap_or_else(|| panic!("no {p} row:\n{table}"))
    };
    // dagrt 60 alone (not its nan rep's 99), OpenMP 51, StarPU 40 (not its failed 90).
    let r = row("n=2048 b=128:");
    assert!(
        r.contains("dagrt-sub-t2 60.0  omp-tiled-t2 51.0  starpu-tiled-t2 40.0"),
        "{table}"
    );
    assert!(r.contains("limit lapack-dpotrf-t2 47.0"), "{table}");
    assert!(r.contains("(omp-tiled-t2) = 1.18"), "{table}");
    assert!(r.contains("(fastest reps: 60.0 / 52.0 = 1.15)"), "{table}");
    // Paired by round: only round 1 has a valid dagrt rep (60 over OpenMP's 50 of that round).
    let paired = "\n  paired by round: dagrt / best peer of its round, median 1.20 [1.20-1.20] \
                  over 1 round\nn=4096 b=256:";
    assert!(table.contains(paired), "{table}");
    // A size whose dagrt reps all failed has a row, with no ratio.
    let r = row("n=4096 b=256:");
    assert!(
        r.contains("omp-tiled-t2 45.0") && r.contains(") = -"),
        "{table}"
    );
    assert!(table.contains("dropped 4 reps"), "{table}");
    // Per runtime and size, out of all its reps there, whether or not a failed one printed
    // its result line.
    for want in [
        "  dagrt n=4096 b=256: 1 of 1 (exit 1, no result line)",
        "  dagrt n=2048 b=128: 1 of 2 (residual nan >= 1e-12)",
        "  omp n=2048 b=128: 1 of 3 (exit 127, no result line)",
        "  starpu n=2048 b=128: 1 of 2 (exit 2, residual 3.100e-05)",
    ] {
        assert!(table.lines().any(|l| l == want), "no '{want}':\n{table}");
    }
}

/// Paired by round, each dagrt rep is divided by the best peer rep of its own round: three
/// rounds in three phases of the host (fast, slow, middling) give 1.0, 0.9 and 1.1, median
/// 1.0, where the medians' ratio (68 / 65, with the unpaired reps) says 1.05. A round without a
/// dagrt rep, or without a peer rep, pairs nothing.
#[test]
fn chol_table_pairs_reps_by_round() {
    let table = chol_table(
        "chol-paired",
        "# round 1\n\
         dagrt-sub-t2 1024 128 36 0.010 70.00 1e-16\n\
         omp-tiled-t2 1024 128 36 0.010 70.00 1e-16\n\
         starpu-tiled-t2 1024 128 36 0.010 50.00 1e-16\n\
         # round 2\n\
         dagrt-sub-t2 1024 128 36 0.010 36.00 1e-16\n\
         omp-tiled-t2 1024 128 36 0.010 40.00 1e-16\n\
         # round 3\n\
         dagrt-sub-t2 1024 128 36 0.010 66.00 1e-16\n\
         starpu-tiled-t2 1024 128 36 0.010 54.55 1e-16\n\
         omp-tiled-t2 1024 128 36 0.010 60.00 1e-16\n\
         # round 4\n\
         omp-tiled-t2 1024 128 36 0.010 99.00 1e-16\n\
         # round 5\n\
         dagrt-sub-t2 1024 128 36 0.010 99.00 1e-16\n",
    );
    assert!(
        table.contains("(omp-tiled-t2) = 1.05"),
        "the medians' ratio:\n{table}"
    );
    assert!(
        table.contains("  paired by round: dagrt / best peer of its round, median 1.00 [0.90-1.10] over 3 rounds"),
        "{table}"
    );
}

/// `chol_rep` (scripts/chol_peers.sh, run by bench.sh for every Cholesky rep) keeps a passing
/// rep's result line; a rep that exits nonzero, with or without a result line, goes in marked
/// FAILED, is reported on stderr with its stderr's last lines, and returns 1 without stopping a
/// `set -e` caller (a failed dagrt rep once ended bench.sh with nothing said).
#[test]
fn chol_rep_reports_a_failed_rep_and_goes_on() {
    let d = scratch("chol-rep");
    let res = d.join("chol.txt");
    let log = d.join("chol.log");
    let script = format!(
        "set -euo pipefail\n\
         . '{}/scripts/chol_peers.sh'\n\
         ok() {{ echo 'rep 1/1: fine'; echo 'dagrt-sub-t2 256 64 20 0.010000 0.56 2.512e-16'; }}\n\
         bad() {{ echo 'dagrt-sub-t2 256 64 20 0.010000 0.56 nan'; \
                 echo 'dagrt_cholesky: the run failed: TASK_FAILED' >&2; return 2; }}\n\
         dead() {{ echo 'dagrt_cholesky: out of memory' >&2; return 1; }}\n\
         r=\"{res}\" l=\"{log}\" failed=0\n\
         chol_rep \"$r\" \"$l\" dagrt 256 64 ok || failed=$((failed + 1))\n\
         chol_rep \"$r\" \"$l\" dagrt 256 64 bad || failed=$((failed + 1))\n\
         chol_rep \"$r\" \"$l\" omp 512 64 dead || failed=$((failed + 1))\n\
         echo \"went on, $failed failed\"\n",
        env!("CARGO_MANIFEST_DIR"),
        res = res.display(),
        log = log.display()
    );
    let out = Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("bash runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout, "went on, 2 failed\n", "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&res).unwrap(),
        "dagrt-sub-t2 256 64 20 0.010000 0.56 2.512e-16\n\
         # FAILED dagrt 256 64 exit 2: dagrt-sub-t2 256 64 20 0.010000 0.56 nan\n\
         # FAILED omp 512 64 exit 1\n"
    );
    assert!(
        stderr.contains("Cholesky rep of dagrt at n=256 b=64 failed: exit 2")
            && stderr.contains("   dagrt_cholesky: the run failed: TASK_FAILED")
            && stderr.contains("Cholesky rep of omp at n=512 b=64 failed: exit 1, no result line")
            && stderr.contains("   dagrt_cholesky: out of memory"),
        "{stderr}"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("TASK_FAILED") && logged.contains("out of memory"));
    let left: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.contains(".rep."))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Every setting scripts/bench.sh reads from the environment, itself or through the scripts it
/// runs with that environment (bench_pairs.sh, chol_peers.sh), is in the list it records in
/// env.txt: a result is read against the settings that produced it.
#[test]
fn bench_sh_records_every_setting_it_reads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts");
    let bench = std::fs::read_to_string(dir.join("bench.sh")).unwrap();
    let recorded: Vec<&str> = bench
        .lines()
        .find_map(|l| l.strip_prefix("settings=\""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("bench.sh lists its settings in settings=\"...\"")
        .split_whitespace()
        .collect();
    assert!(
        bench.contains("for k in $settings; do echo \"  $k=${!k}\"; done"),
        "the list is not written to env.txt"
    );
    let mut read = std::collections::BTreeSet::new();
    for script in ["bench.sh", "bench_pairs.sh", "chol_peers.sh"] {
        let text = std::fs::read_to_string(dir.join(script)).unwrap();
        // ${NAME:-default} or ${NAME-default}: a setting the environment may give.
        for (i, _) in text.match_indices("${") {
            let name: String = text[i + 2..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            let rest = &text[i + 2 + name.len()..];
            // TMPDIR only places CHOL_BUILD's default, which is recorded resolved.
            if name.starts_with(|c: char| c.is_ascii_uppercase())
                && name != "TMPDIR"
                && (rest.starts_with(":-") || rest.starts_with('-'))
            {
                read.insert((name, script));
            }
        }
    }
    assert!(read.len() >= 12, "{read:?}");
    for (name, script) in &read {
        assert!(
            recorded.contains(&name.as_str()),
            "{script} reads {name}, which env.txt does not record ({recorded:?})"
        );
    }
}

/// The host probe's verdict on a round: mixed when its two halves ran at different levels or
/// only one of them saw the phase change; drifted when both saw it alike, or the only half
/// did (no peers); slow when the whole round ran in a slow phase; nothing otherwise.
#[test]
fn host_notes_tell_mixed_from_drifted_and_slow() {
    let code = r#"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("bc", sys.argv[1])
bc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bc)
def h(before, after):
    return {"before": before, "after": after}
cases = [
    ({"dagrt": h(54.6, 54.4), "peers": h(55.0, 160.2)}, 54, "mixed"),
    ({"dagrt": h(40, 40), "peers": h(80, 82)}, 40, "mixed"),
    ({"dagrt": h(10, 14), "peers": h(10, 14)}, 10, "drifted"),
    ({"dagrt": h(10, 14)}, 10, "drifted"),
    ({"dagrt": h(150.8, 155.2), "peers": h(154.7, 149.0)}, 54, "slow"),
    ({"dagrt": h(40, 40), "peers": h(41, 40)}, 40, ""),
]
for halves, fastest, want in cases:
    got = bc.host_note(halves, fastest)
    word = got.split("<- ")[1].split(":")[0] if got else ""
    print("ok" if word == want else "BAD %r -> %r, want %s" % (halves, got, want))
"#;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench_compare.py");
    let out = Command::new("python3")
        .args(["-c", code])
        .arg(&script)
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text.lines().filter(|l| *l == "ok").count(), 6, "{text}");
}

/// `chol_gaps.py` on a made-up kernel log of two threads over a 400 us span: thread 1 starts
/// the span and ends it, with a 1 us gap and a 50 us one between its kernels; thread 2 starts
/// 10 us late, ends 10 us early, with a 3 us gap. Shares are of 2 x 400 us. A second log's
/// long gap starts in its span's first tenth (at 10 us of 400), where the first log's starts
/// after it (at 200 us).
#[test]
fn chol_gaps_splits_idle_time_into_lead_tail_short_and_long_gaps() {
    let d = scratch("chol_gaps");
    let log = d.join("run.log");
    std::fs::write(
        &log,
        "1 0 100000\n2 10000 300000\n1 101000 200000\n2 303000 390000\n1 250000 400000\n",
    )
    .unwrap();
    let out = python("chol_gaps.py", &[&log], &[]);
    for want in [
        "lead   share of threads x span: median 0.0125 [0.0125-0.0125]",
        "tail   share of threads x span: median 0.0125 [0.0125-0.0125]",
        "short  share of threads x span: median 0.0050 [0.0050-0.0050]",
        "long   share of threads x span: median 0.0625 [0.0625-0.0625]",
        "short gap, median per run (us): median 2.00 [2.00-2.00]",
        "long gaps per run: median 1; runs 1, threads 2",
        "long gaps in the first tenth, ms per run: median 0.000 [0.000-0.000]",
        "long gaps after it, ms per run: median 0.050 [0.050-0.050]",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    let early = d.join("early.log");
    std::fs::write(&early, "1 0 10000\n2 0 400000\n1 40000 400000\n").unwrap();
    let out = python("chol_gaps.py", &[&log, &early], &[]);
    for want in [
        "long gaps in the first tenth, ms per run: median 0.015 [0.000-0.030]",
        "long gaps after it, ms per run: median 0.025 [0.000-0.050]",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    // A log with no kernel calls is refused rather than counted as a run without gaps.
    let empty = d.join("empty.log");
    std::fs::write(&empty, "").unwrap();
    let st = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/chol_gaps.py"))
        .arg(&empty)
        .status()
        .unwrap();
    assert!(!st.success());
    let _ = std::fs::remove_dir_all(&d);
}
