//! The one pdfium binding of the process: loaded from the configured shared library on
//! first use and kept for the life of the process (pdfium can only be initialised once).

use std::path::Path;
use std::sync::OnceLock;

use pdfium_render::prelude::Pdfium;

static PDFIUM: OnceLock<Result<Pdfium, String>> = OnceLock::new();

/// The process-wide pdfium instance, bound to `library` on the first call. Later calls
/// get the same instance whatever path they pass: the library cannot be swapped once
/// loaded. The error says why pdfium is unavailable (missing or unloadable library).
pub(crate) fn pdfium(library: &Path) -> Result<&'static Pdfium, String> {
    PDFIUM
        .get_or_init(|| {
            Pdfium::bind_to_library(library)
                .map(Pdfium::new)
                .map_err(|e| {
                    tracing::error!(library = %library.display(), error = ?e, "cannot load pdfium");
                    format!(
                        "PDF support is unavailable: pdfium could not be loaded from {} \
                         (run scripts/setup.sh)",
                        library.display()
                    )
                })
        })
        .as_ref()
        .map_err(Clone::clone)
}
