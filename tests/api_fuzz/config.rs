//! The fuzzer's defaults and time limits, and how the DAGRT_FUZZ_* environment overrides
//! them.

use std::time::Duration;

// ---------------------------------------------------------------------------------------
// Configuration

pub(crate) const DEFAULT_SEQS: u64 = 300;
pub(crate) const DEFAULT_STEPS: u64 = 200;
pub(crate) const DEFAULT_SEED: u64 = 0xDA67_F022_5EED_0001;
/// A bounded wait the model proves finite: far beyond any legitimate duration.
pub(crate) const LONG_WAIT_MS: u64 = 20_000;
/// Polling for reclamation before a call the model says must succeed.
pub(crate) const POLL_LIMIT: Duration = Duration::from_secs(10);
/// Executors blocked on a gate give up (and report) after this long.
pub(crate) const GATE_LIMIT: Duration = Duration::from_secs(25);

pub(crate) fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}
