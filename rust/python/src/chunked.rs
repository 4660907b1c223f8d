//! `ChunkedDecoder`: the core's HTTP/1.1 chunked decoder (H8) for the
//! asyncio transport's protocol; the error texts are made in `_http1.py`.

use fastagg_core::http_chunked::{self, ChunkedError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Decodes one chunked HTTP/1.1 body as its bytes arrive (any split).
#[pyclass(module = "fastagg._fastagg")]
pub struct ChunkedDecoder {
    core: http_chunked::ChunkedDecoder,
    out: Vec<u8>,
    beyond: usize,
    error: Option<ChunkedError>,
}

#[pymethods]
impl ChunkedDecoder {
    #[new]
    fn new() -> Self {
        Self {
            core: http_chunked::ChunkedDecoder::new(),
            out: Vec::new(),
            beyond: 0,
            error: None,
        }
    }

    /// The payload bytes in `data`. After a framing error, the payload before
    /// it; `error` is then set and later calls return `b""`.
    fn decode<'py>(&mut self, py: Python<'py>, data: &[u8]) -> Bound<'py, PyBytes> {
        if self.error.is_some() || self.core.done() {
            self.beyond += data.len();
            return PyBytes::new(py, b"");
        }
        self.out.clear();
        match self.core.decode(data, &mut self.out) {
            Ok(used) => self.beyond += data.len() - used,
            Err(e) => self.error = Some(e),
        }
        PyBytes::new(py, &self.out)
    }

    /// The last chunk and the trailers ended.
    #[getter]
    fn done(&self) -> bool {
        self.core.done()
    }

    /// Bytes given after the body's end (a connection that cannot be reused).
    #[getter]
    fn beyond(&self) -> usize {
        self.beyond
    }

    /// None, or what is wrong: `("not-hex" | "too-large", line)`,
    /// `("line-too-long", b"")` or `("no-crlf", b"")`.
    #[getter]
    fn error<'py>(&self, py: Python<'py>) -> Option<(&'static str, Bound<'py, PyBytes>)> {
        self.error.as_ref().map(|e| match e {
            ChunkedError::NotHex(line) => ("not-hex", PyBytes::new(py, line)),
            ChunkedError::TooLarge(line) => ("too-large", PyBytes::new(py, line)),
            ChunkedError::LineTooLong => ("line-too-long", PyBytes::new(py, b"")),
            ChunkedError::NoCrlf => ("no-crlf", PyBytes::new(py, b"")),
        })
    }
}
