//! dagrt: a DAG task runtime with a C ABI.
//!
//! A host builds a task graph on one thread (the [`orchestrator`]); dependencies are inferred
//! from tensor tags over the memory each view touches, plus explicit handle deps. A
//! [`scheduler`] thread dispatches READY tasks to worker [`lane`]s in dependency order and
//! releases consumers as producers finish. The behaviour follows the two seed documents
//! (Orchestrator, Scheduler); `DESIGN.md` maps them onto these modules.

pub mod affinity;
pub mod callable;
pub mod capi;
pub mod error;
pub mod event;
pub mod fork;
pub mod lane;
pub mod log;
pub mod orchestrator;
pub mod prefetch;
pub mod ring;
pub mod run;
pub mod scheduler;
pub mod scope;
pub mod slot;
pub mod spsc;
pub(crate) mod sync;
pub mod task;
pub mod tensormap;
pub mod trace;
pub mod view;
pub mod wholefile;
pub mod worker;
