//! R14: a Python `str` into the core's UTF-8 without a copy left on the `str`
//! (`feed_chunk()`).
//!
//! `PyUnicode_AsUTF8AndSize` (what `to_str()` calls) encodes a `str` that is
//! not ASCII into a UTF-8 copy it then keeps inside the `str` for the rest of
//! the `str`'s life: a list of google-genai responses fed to `feed_chunk()`
//! would grow by the UTF-8 size of every non-ASCII text and argument in it,
//! and a second `feed_chunk()` of the same object would skip the encoding
//! (which made repeated benchmark runs cheaper than any real first feed).
//! Here an ASCII `str`'s bytes are copied straight from its data, and any
//! other is encoded by Python's UTF-8 encoder into a temporary `bytes`,
//! copied into the core's `String` and dropped.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// The UTF-8 bytes of a `str`: its own data (ASCII), or a temporary encoding.
pub(crate) enum StrBytes<'a, 'py> {
    Ascii(&'a [u8]),
    Encoded(Bound<'py, PyBytes>),
}

impl StrBytes<'_, '_> {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Ascii(bytes) => bytes,
            Self::Encoded(encoded) => encoded.as_bytes(),
        }
    }
}

/// R14: the UTF-8 bytes of `s`, nothing kept on `s`; a `str` with a lone
/// surrogate is the `UnicodeEncodeError` Python's encoder raises.
pub(crate) fn str_bytes<'a, 'py>(s: &'a Bound<'py, PyString>) -> PyResult<StrBytes<'a, 'py>> {
    let ptr = s.as_ptr();
    // SAFETY: `s` is a `str` (the cast that made the `Bound<PyString>`
    // checked it); these read its state: a ready ASCII `str`'s data is its
    // `len` bytes, alive (and unchanged: a `str` is immutable) while `s` is
    // borrowed. (From 3.12 every `str` is ready.)
    unsafe {
        #[allow(deprecated)] // since 3.14: a constant 1
        let ready = ffi::PyUnicode_IS_READY(ptr) != 0;
        if ready && ffi::PyUnicode_IS_ASCII(ptr) != 0 {
            let len = usize::try_from(ffi::PyUnicode_GET_LENGTH(ptr)).unwrap_or(0);
            let data = ffi::PyUnicode_DATA(ptr).cast::<u8>();
            return Ok(StrBytes::Ascii(std::slice::from_raw_parts(data, len)));
        }
    }
    // SAFETY: PyUnicode_AsUTF8String returns a new `bytes` reference or NULL
    // with an exception set (a lone surrogate).
    Ok(StrBytes::Encoded(unsafe {
        Bound::from_owned_ptr_or_err(s.py(), ffi::PyUnicode_AsUTF8String(ptr))?
            .cast_into_unchecked::<PyBytes>()
    }))
}

/// R14: the UTF-8 text of `s` in a new `String` (see [`str_bytes`]).
pub(crate) fn owned_utf8(s: &Bound<'_, PyString>) -> PyResult<String> {
    let bytes = str_bytes(s)?.as_bytes().to_vec();
    debug_assert!(std::str::from_utf8(&bytes).is_ok());
    // SAFETY: ASCII, or what Python's strict UTF-8 encoder wrote: UTF-8.
    Ok(unsafe { String::from_utf8_unchecked(bytes) })
}
