//! Scope (Orchestrator seed §6): one outer scope per run plus up to 64 nested ones. Each
//! submitted slot registers one deferred lifetime reference in the innermost open scope;
//! `scope_end` releases them without waiting.

use crate::slot::SlotId;

/// Nested scopes allowed on top of the run's outer scope.
pub const MAX_SCOPE_DEPTH: usize = 64;

#[derive(Debug, PartialEq, Eq)]
pub enum ScopeError {
    /// scope_end with no nested scope open (the outer scope belongs to the run).
    Unbalanced,
    /// More than MAX_SCOPE_DEPTH nested scopes.
    TooDeep,
}

/// How far ahead of its release a scope's slot is announced (a few cache misses' worth).
pub const AHEAD: usize = 8;

#[derive(Default)]
pub struct Scope {
    /// Frames; frame 0 is the run's outer scope. Popped frames keep their capacity.
    stack: Vec<Vec<SlotId>>,
    depth: usize,
}

impl Scope {
    /// 1-based depth: 0 = no scope open.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// 0-based depth, which selects the heap ring.
    pub fn current_depth(&self) -> usize {
        self.depth.saturating_sub(1)
    }

    /// Open the run's outer scope.
    pub fn open_outer(&mut self) {
        debug_assert_eq!(self.depth, 0);
        self.push();
    }

    pub fn begin(&mut self) -> Result<(), ScopeError> {
        if self.depth > MAX_SCOPE_DEPTH {
            return Err(ScopeError::TooDeep);
        }
        self.push();
        Ok(())
    }

    fn push(&mut self) {
        if self.stack.len() == self.depth {
            self.stack.push(Vec::new());
        }
        self.depth += 1;
    }

    /// Register a slot's reference in the innermost scope (idempotent per slot per level is
    /// the caller's contract: submit registers each slot once).
    pub fn register(&mut self, sid: SlotId) {
        self.stack[self.depth - 1].push(sid);
    }

    /// Pop a nested scope; `release` is called for each registered slot, with the slot it
    /// will be called for `AHEAD` calls later (to prefetch: a long scope's slots are cold).
    pub fn end(&mut self, release: impl FnMut(SlotId, Option<SlotId>)) -> Result<(), ScopeError> {
        if self.depth <= 1 {
            return Err(ScopeError::Unbalanced);
        }
        self.pop(release);
        Ok(())
    }

    /// Pop the run's outer scope (close of submission).
    pub fn end_outer(&mut self, release: impl FnMut(SlotId, Option<SlotId>)) {
        debug_assert_eq!(self.depth, 1);
        self.pop(release);
    }

    fn pop(&mut self, mut release: impl FnMut(SlotId, Option<SlotId>)) {
        self.depth -= 1;
        let mut frame = std::mem::take(&mut self.stack[self.depth]);
        for (i, &sid) in frame.iter().enumerate() {
            release(sid, frame.get(i + AHEAD).copied());
        }
        frame.clear();
        self.stack[self.depth] = frame;
    }
}
