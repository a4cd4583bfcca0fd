//! Thread lane: the registered executor runs on a lane thread of this process.

use super::{Completion, Job};
use crate::ring::SlotKind;
use crate::task::TaskView;
use crate::worker::Engine;
use std::ffi::c_void;
use std::sync::Arc;

/// Body of a lane thread: run jobs until told to stop.
pub fn lane_main(e: Arc<Engine>, idx: u32) {
    let lane = &e.lanes[idx as usize];
    crate::trace::set_lane_thread(idx);
    let mut last_ns = 0;
    // An idle lane looks for jobs queued behind another lane's stalled one every
    // STUCK_SWEEP while it spins: with nothing else happening, no pass would (see
    // `scheduler::idle_sweep`).
    let mut looked = std::time::Instant::now();
    let idle = |looked: &mut std::time::Instant| {
        if looked.elapsed() >= crate::scheduler::STUCK_SWEEP {
            *looked = std::time::Instant::now();
            crate::scheduler::idle_sweep(&e);
        }
    };
    while let Some(job) = lane
        .mailbox
        .next(last_ns < crate::scheduler::SHORT_JOB_NS, || {
            idle(&mut looked)
        })
    {
        // A job queued behind another is claimed now; losing the claim (it was cancelled or
        // moved to another lane) means it is reported skipped, unrun.
        let ran = job.claimed || e.slots.get(job.slot).core.try_claim_running_id(job.slot);
        let (failure, ns) = if ran {
            let t0 = std::time::Instant::now();
            let failure = run_job(&e, idx, job);
            last_ns = t0.elapsed().as_nanos() as u64;
            (failure, last_ns)
        } else {
            (None, 0)
        };
        crate::lane::report(
            &e,
            Completion {
                lane: idx,
                slot: job.slot,
                member: job.member,
                failure,
                ns,
                skipped: !ran,
            },
        );
        crate::scheduler::after_completion(&e);
    }
}

/// Where `dagrt_task_fail` leaves its message.
pub struct FailSlot {
    pub msg: Option<String>,
}

fn run_job(e: &Engine, idx: u32, job: Job) -> Option<Arc<str>> {
    let slot = e.slots.get(job.slot);
    // SAFETY: the slot is RUNNING and dispatched to this lane; during the call only lanes
    // read the data (the scheduler writes group bookkeeping only on completions).
    let d = unsafe { slot.data() };
    debug_assert!(d.kind != SlotKind::Alloc);
    let entry = d.entry?;
    let m = d.members[job.member as usize];
    let tensors = &d.tensors[m.tensor_start as usize..(m.tensor_start + m.tensor_len) as usize];
    let scalars = &d.scalars[m.scalar_start as usize..(m.scalar_start + m.scalar_len) as usize];
    let mut fail = FailSlot { msg: None };
    let view = TaskView {
        tensors: tensors.as_ptr(),
        num_tensors: m.tensor_len,
        num_scalars: m.scalar_len,
        scalars: scalars.as_ptr(),
        config: &d.config,
        worker_id: e.lanes[idx as usize].kind.view_id(),
        member_index: job.member,
        group_size: d.members.len() as u32,
        reserved: 0,
        run_id: d.run.id,
        slot: job.slot,
        private_: &mut fail as *mut FailSlot as *mut c_void,
    };
    // SAFETY: the executor was registered for exactly this call shape; `view` and everything
    // it points to outlive the call.
    let traced = e.trace.on();
    let t0 = if traced { e.trace.now() } else { 0 };
    let rc = unsafe { (entry.exec)(&view, entry.user) };
    if traced {
        let failed = rc != 0 || fail.msg.is_some();
        e.trace.task(
            idx,
            &entry.name,
            view.run_id,
            job.slot,
            job.member,
            t0,
            e.trace.now(),
            failed,
        );
    }
    match (rc, fail.msg) {
        (0, None) => None,
        (_, Some(m)) => Some(Arc::from(format!(
            "task '{}' (slot {}) failed: {m}",
            entry.name, job.slot
        ))),
        (rc, None) => Some(Arc::from(format!(
            "task '{}' (slot {}) failed with code {rc}",
            entry.name, job.slot
        ))),
    }
}
