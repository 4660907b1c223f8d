//! fastagg-core: the sans-IO streaming core of fastagg.
//!
//! Bytes of a Gemini `streamGenerateContent` body go in (`framing`),
//! event payloads are parsed and folded into the aggregated model turn
//! (`aggregate`, with `json_path` for streamed function-call arguments).
//! Nothing here knows about Python; `rust/python` only translates.

pub mod aggregate;
pub mod diagnostics;
pub mod error;
pub mod event;
pub mod framing;
pub mod interactions;
pub mod json_path;
pub mod scan;
