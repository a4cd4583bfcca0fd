//! Sequence fuzzer for the C API: random call sequences, valid and invalid, checked against
//! a shadow model of the API's state machine.
//!
//! Each sequence drives the exported `dagrt_*` functions (called from Rust, exactly as a C
//! host calls them) on one or two workers: worker new / add lanes / init / orch / stats /
//! close / close_for (close within a cleanup budget) / free; callable registration; the
//! args builder and the tensor initialisers; runs (begin, the four submits, alloc, scope
//! begin/end, close, fail, wait, wait_for, done, stats, release) and `dagrt_worker_submit`
//! / `dagrt_worker_run` with an orchestration callback that itself makes random calls. At
//! every step it picks a random call, valid or not: null required pointers, handles of
//! another run / a released run / another worker / forged slots, unknown lane ids,
//! duplicate group targets, SUB groups larger than the SUB lane count, bad tags / dtypes /
//! ndim / reserved fields, null data on non-OUTPUT tensors, OUTPUT_EXISTING with null data,
//! scope misuse (end without begin, more than 64 nested, close with scopes open), calls in
//! the wrong state (submit with no run, begin twice, release an unfinished run, add lanes
//! after init, calls on a closed worker, a bounded close with a run open, new runs on a
//! worker whose bounded close ran out of budget), orchestrator calls from a second thread
//! while a run is being built (WRONG_THREAD), bounded waits, and workers with tiny task
//! windows / heap rings and short back-pressure timeouts (WINDOW_FULL / HEAP_EXHAUSTED,
//! which must be recoverable).
//!
//! The shadow model predicts, for every call, the set of statuses it may return: one status
//! for a call with one defect (several only when several defects are present, or when the
//! outcome legitimately depends on timing, e.g. whether a slot was reclaimed yet). To keep
//! predictions exact where it matters, the model tracks which slots are *definitely* live
//! (held by an open scope, blocked on a closed gate, or retained by a blocked consumer) and
//! which are *possibly* live, and polls `dagrt_worker_stats` until everything else has been
//! reclaimed before a call it predicts must succeed. Where the header is explicit the model
//! follows the header, not the implementation (e.g. the task window is rounded up to a power
//! of two; an empty heap ring holds any request that fits in a ring; a closed worker takes
//! no "before init only" call). Tensors view synthetic host addresses (executors never touch
//! memory), runtime buffers (`dagrt_alloc`, auto-allocated OUTPUT) while their scope is open,
//! with INPUT / INOUT / NO_DEP only (a writer must be INOUT to keep runtime memory alive),
//! and dependencies are modelled byte-exactly over dense ranges. Checks:
//! - the status is in the predicted set; a failure leaves a non-empty `dagrt_last_error()`,
//!   a success leaves it unchanged (same text, same pointer: errno-like), a failure on the
//!   helper thread leaves the main thread's message alone; out-parameters are untouched on
//!   failure; WINDOW_FULL / HEAP_EXHAUSTED take at least the back-pressure timeout and carry
//!   the documented messages, and leave no trace (no slot, no heap);
//! - executors count every invocation: a task the model says runs runs exactly once per
//!   member, on the right lane, with its own tensors (auto-allocated OUTPUT addresses as
//!   written back), scalars, config, member index, group size, run id and slot, after every
//!   producer ended; a task downstream of a failure, or cancelled by a failed submission,
//!   never runs; a rejected submit never runs; run status, message and per-run counts
//!   (completed / failed / cancelled) match the model;
//! - heap placement matches the ring model (tops exact, 1024-aligned, one base per ring);
//! - `dagrt_worker_close_for`: out_closed is 1 when no registered run can still be running
//!   (or the budget is large and every gate opens), 0 when a run is definitely blocked on a
//!   closed gate and the budget (0 or 1-20 ms) is far below the gate's hold; a closed = 0
//!   comes no earlier than the budget, tears nothing down (stats exact, runs still waited
//!   and released) and leaves the worker closing: new runs (begin, worker submit / run)
//!   fail WRONG_STATE "closing", everything else behaves as before, and a later close or
//!   close_for finishes the job;
//! - no leak: after each sequence every run was closed, waited and released, and
//!   `dagrt_worker_stats` shows live_slots 0, tensormap_entries 0, runs 0, heap tail == top
//!   on every ring (and, once the scheduler's pass ends, nothing queued); at any time the
//!   registered run count and the heap tops are exact and live_slots / tails are within the
//!   model's bounds;
//! - no hang: a watchdog thread aborts the process (printing the seed and the call log) if
//!   no call completes for DAGRT_FUZZ_HANG_SECS (default 60 s); every wait the model cannot
//!   prove finite is a bounded `dagrt_wait_run_for`.
//!
//! Environment: DAGRT_FUZZ_SEQS (sequences, default 300), DAGRT_FUZZ_STEPS (maximum steps
//! per sequence, default 200; a sequence runs between a quarter of it and all of it),
//! DAGRT_FUZZ_SEED (base seed, decimal or 0x-hex), DAGRT_FUZZ_HANG_SECS (watchdog),
//! DAGRT_FUZZ_LOG_LINES (call-log lines printed per distinct failure, default 150). Failed
//! checks are grouped by signature (known engine defects get a descriptive one) and each is
//! printed once with its sequence seed: `DAGRT_FUZZ_SEED=<seed> DAGRT_FUZZ_SEQS=1` replays
//! that sequence (the registry is reset to the same state per sequence; timing may differ).

mod args;
mod builders;
mod callables;
mod callbacks;
mod checks;
#[path = "../common/mod.rs"]
mod common;
mod config;
mod executors;
mod ffi;
mod format;
mod fuzzer;
mod helper;
mod memory;
mod misc;
mod model;
mod orch;
mod predict;
mod query;
mod rng;
mod run_end;
mod scopes;
mod sequences;
mod submit;
mod watchdog;
mod worker_close;
mod workers;
