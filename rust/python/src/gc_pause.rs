//! R11: the cyclic garbage collector is paused while a result's Python objects are built.
//!
//! A result's values are kept (R6), so every list and dict the build makes survives:
//! each 700 of them set off a young-generation collection that walks them, and every
//! tenth of those walks the middle generation again. Paused, the build sets off none;
//! the one collection its allocations are owed runs at the next allocation after it
//! (from Python 3.12: is scheduled by it, and runs at the interpreter's next check).
//! Sound because the build runs no Python code (it only makes `str`, `int`, `float`,
//! `list` and `dict` objects from data the core holds) and keeps the GIL throughout
//! (the extension is not declared free-threading safe, `spec/performance.md` R3), so
//! no other code can see the pause or change the collector's state during it; a
//! collector that was already off (the caller's `gc.disable()`, or an enclosing
//! pause) is left off.

use std::marker::PhantomData;

use pyo3::Python;

/// While alive, the collector is off; dropping it turns back on what it turned off.
pub(crate) struct GcPause<'py> {
    resume: bool,
    _gil: PhantomData<Python<'py>>,
}

impl<'py> GcPause<'py> {
    pub(crate) fn new(_py: Python<'py>) -> Self {
        // SAFETY: the `Python` token proves the GIL is held, which these calls need.
        let was_enabled = unsafe { pyo3::ffi::PyGC_Disable() } != 0;
        Self {
            resume: was_enabled,
            _gil: PhantomData,
        }
    }
}

impl Drop for GcPause<'_> {
    fn drop(&mut self) {
        if self.resume {
            // SAFETY: the guard cannot outlive the `Python<'py>` it was made with.
            unsafe { pyo3::ffi::PyGC_Enable() };
        }
    }
}
