//! Directed tests: views with repeated strides are tracked (via `wired_after`), and one
//! long-lived slot does not block the task window.

use super::*;

// ---------------------------------------------------------------------------------------
// Tests: directed

/// Submit one SUB task with the one tensor `t` and the executor's scalars `scalars` ([RunRec
/// address, node, member, spin]).
fn sub_one(
    o: &mut Orchestrator,
    t: &mut Tensor,
    scalars: &[u64; 4],
) -> Result<TaskHandle, dagrt::error::Error> {
    let args = TaskArgs {
        tensors: t,
        num_tensors: 1,
        num_scalars: 4,
        scalars: scalars.as_ptr(),
        deps: std::ptr::null(),
        num_deps: 0,
        reserved: 0,
    };
    o.submit(
        SubmitKind::Sub,
        &callable(),
        std::slice::from_ref(&args),
        &CallConfig::default(),
        &[],
    )
}

/// Submit `writer` (blocked at a closed gate) then `reader` on the same static buffer and
/// report whether the reader was wired to wait for the writer, as the reference model says
/// it must (the two views share at least one byte).
fn wired_after(env: &Env, writer: Tensor, reader: Tensor) -> Result<bool, String> {
    let mut bytes_w = Vec::new();
    let mut bytes_r = Vec::new();
    view_bytes(&writer, writer.data as u64, &mut bytes_w);
    view_bytes(&reader, reader.data as u64, &mut bytes_r);
    if !bytes_r.iter().any(|x| bytes_w.contains(x)) {
        return Err("test setup: the views share no byte".into());
    }
    let rr = Box::into_raw(Box::new(RunRec::new(env.engine.clone(), true)));
    // SAFETY: just allocated; freed below after the run finished (leaked on error paths).
    let rr_ref = unsafe { &*rr };
    let mut o = env.orch();
    let run = o.begin_run().map_err(|e| e.to_string())?;
    let mut handles = Vec::new();
    for (i, mut t) in [writer, reader].into_iter().enumerate() {
        let scalars = [rr as u64, i as u64, 0, 0];
        let h = sub_one(&mut o, &mut t, &scalars).map_err(|e| e.to_string())?;
        handles.push(h);
    }
    o.close_run_submission(run).map_err(|e| e.to_string())?;
    drop(o);
    let e = &env.engine;
    let wired = {
        let g = e.slots.get(handles[0].slot).core.lock_sync();
        g.consumers.iter().any(|x| x.slot == handles[1].slot)
    };
    let reader_state = e.slots.get(handles[1].slot).core.state();
    rr_ref.gate_open.store(true, Ordering::Release);
    let r = e.runs.get(run).ok_or("run vanished")?;
    if !r.wait(Some(RUN_TIMEOUT)) {
        return Err("run hung".into());
    }
    e.runs.remove_done(run);
    // SAFETY: the run is done: no executor reads the RunRec any more.
    drop(unsafe { Box::from_raw(rr) });
    env.check_reclaimed()?;
    Ok(wired && reader_state == PENDING)
}

/// Regression for a missed edge found by the random test (seed 0x757ae5f1d541298c): a view
/// with two dimensions of the same stride (a sliding window) touches bytes its footprint did
/// not account for, so a reader of those bytes was not ordered after the writer.
#[test]
fn views_with_repeated_strides_are_tracked() {
    let _g = serial();
    let env = Env::new("R", lanes_a(), cfg(64, 5_000));
    let base = env.statics[3].as_ptr() as u64;
    let cases = [
        // u8 shape [2,2] strides [1,1] touches bytes 0,1,2; the reader reads byte 2.
        (
            tensor(base, 0, DataType::U8, &[2, 2], &[1, 1]),
            tensor(base, 2, DataType::U8, &[], &[]),
        ),
        // u64 shape [4,4] strides [1,1]: elements 0..=6; the reader reads element 6.
        (
            tensor(base, 0, DataType::U64, &[4, 4], &[1, 1]),
            tensor(base, 48, DataType::U64, &[], &[]),
        ),
        // the case of the random seed: u8 [3,4] strides [1,1] at 59 (bytes 59..=64) vs a u16
        // read of bytes 64,65,82,83.
        (
            tensor(base, 59, DataType::U8, &[3, 4], &[1, 1]),
            tensor(base, 64, DataType::U16, &[2], &[9]),
        ),
        // A plain 4x4 tile of a column-major u8 matrix (ld 16): its unit-stride dimension has
        // byte stride 1, like the element itself; the reader reads element (2, 0).
        (
            tensor(base, 0, DataType::U8, &[4, 4], &[1, 16]),
            tensor(base, 2, DataType::U8, &[], &[]),
        ),
        // Seed 0xf5392ce3dcc3fa3f: u8 [3,3] strides [9,1] at 64 writes byte 84; a u32 INOUT of
        // bytes 84..88 was not ordered after it.
        (
            tensor(base, 64, DataType::U8, &[3, 3], &[9, 1]),
            tensor(base, 84, DataType::U32, &[], &[]),
        ),
    ];
    let mut bad = Vec::new();
    for (i, (mut w, mut r)) in cases.into_iter().enumerate() {
        w.tag = Tag::OutputExisting as u32;
        r.tag = Tag::Input as u32;
        match wired_after(&env, w, r) {
            Ok(true) => {}
            Ok(false) => bad.push(format!(
                "case {i}: reader {} not ordered after writer {}",
                describe_tensor(&r, &[], usize::MAX),
                describe_tensor(&w, &[], usize::MAX)
            )),
            Err(m) => fail(
                "views_with_repeated_strides_are_tracked",
                &m,
                None,
                vec![env],
            ),
        }
    }
    assert!(bad.is_empty(), "MISSED EDGES:\n{}", bad.join("\n"));
}

/// One long-lived slot (an alloc() buffer in the run's outer scope, the common "scratch
/// buffer, then scoped loops" pattern) must not block the task window once `window` more
/// tasks were submitted, when those tasks are all reclaimable: a window of 8 with at most
/// 3 slots live must keep accepting submits.
#[test]
fn task_window_not_blocked_by_one_long_lived_slot() {
    let _g = serial();
    let env = Env::new("H", lanes_a(), cfg(8, 2_000));
    let rr = Box::into_raw(Box::new(RunRec::new(env.engine.clone(), false)));
    let mut o = env.orch();
    let run = o.begin_run().expect("begin_run");
    let (buf, ah) = o.alloc(&[16], DataType::U64 as u32).expect("alloc");
    let mut failure = None;
    let n = 24;
    for i in 0..n {
        o.scope_begin().expect("scope_begin");
        let mut t = tensor(buf as u64, 0, DataType::U64, &[16], &[]);
        t.tag = Tag::Input as u32;
        let scalars = [rr as u64, i as u64, 0, 0];
        let r = sub_one(&mut o, &mut t, &scalars);
        o.scope_end().expect("scope_end");
        if let Err(e) = r {
            failure = Some(format!(
                "submit {i} (alloc slot {}, window 8) failed after waiting 2 s, with {} slot(s) \
                 live when it gave up: {e}",
                ah.slot,
                env.engine.slots.live()
            ));
            break;
        }
    }
    o.close_run_submission(run).expect("close");
    drop(o);
    let r = env.engine.runs.get(run).expect("run");
    assert!(r.wait(Some(RUN_TIMEOUT)), "run hung");
    env.engine.runs.remove_done(run);
    // SAFETY: the run is done: no executor reads the RunRec any more.
    drop(unsafe { Box::from_raw(rr) });
    env.check_reclaimed().expect("reclaimed");
    if let Some(m) = failure {
        panic!("{m}");
    }
}
