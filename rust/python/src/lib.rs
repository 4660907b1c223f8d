//! `fastagg._fastagg`: the Python face of `fastagg-core`. Conversions only;
//! every rule lives in the core crate.

mod aggregator;
mod alloc;
mod convert;
mod decoder;
mod deltas;
mod detach;
mod errors;
mod interactions;
mod results;

use pyo3::prelude::*;

use crate::aggregator::StreamAggregator;
use crate::decoder::SseDecoder;
use crate::deltas::{ArgDelta, CallEnd, CallStart, Finish, SseEvent, StreamError, TextDelta};
use crate::results::{AggregatedResponse, Candidate};

#[pymodule]
fn _fastagg(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StreamAggregator>()?;
    m.add_class::<AggregatedResponse>()?;
    m.add_class::<Candidate>()?;
    m.add_class::<TextDelta>()?;
    m.add_class::<CallStart>()?;
    m.add_class::<ArgDelta>()?;
    m.add_class::<CallEnd>()?;
    m.add_class::<Finish>()?;
    m.add_class::<StreamError>()?;
    m.add_class::<SseDecoder>()?;
    m.add_class::<SseEvent>()?;
    m.add_class::<interactions::InteractionResponse>()?;
    Ok(())
}
