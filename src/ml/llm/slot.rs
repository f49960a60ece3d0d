//! [`LlmSlot`]: the one place every service asks for the current language model, so the
//! model can be switched at run time without the services knowing.
//!
//! A switch loads the new file beside the old model on a blocking thread, then swaps the
//! slot's `Arc` in one step. Requests already running hold their own clone of the old
//! generator: they finish on it, and its worker thread (with its weights and prompt
//! cache) ends when the last clone is dropped. A load that fails leaves the slot as it
//! was and returns the reason.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::{MlError, ModelInfo, SharedGenerator};

/// Why a load failed, as one line safe to show: candle's errors may carry a backtrace
/// after their first line (when `RUST_BACKTRACE` is set), which belongs in no answer.
pub fn load_reason(e: &MlError) -> String {
    let text = match e {
        MlError::Load(m) | MlError::InvalidInput(m) => m.clone(),
        other => other.to_string(),
    };
    text.lines()
        .next()
        .unwrap_or_default()
        .trim_end()
        .to_owned()
}

/// Loads a GGUF file into a running generator (blocking: it reads the weights).
pub type LlmLoader = Arc<dyn Fn(&Path) -> Result<SharedGenerator, MlError> + Send + Sync>;

/// What the slot holds now.
#[derive(Clone, Default)]
struct Current {
    generator: Option<SharedGenerator>,
    file: Option<PathBuf>,
    failure: Option<String>,
}

struct Inner {
    current: RwLock<Current>,
    /// One switch at a time: two loads beside the running model would need three models'
    /// memory.
    switching: tokio::sync::Mutex<()>,
    loader: Option<LlmLoader>,
}

/// The current LLM, shared by every service; cloning shares the slot.
#[derive(Clone)]
pub struct LlmSlot {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LlmSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = self.read();
        f.debug_struct("LlmSlot")
            .field(
                "model",
                &c.generator.as_ref().map(|g| g.info().name.clone()),
            )
            .field("file", &c.file)
            .field("failure", &c.failure)
            .finish()
    }
}

impl LlmSlot {
    /// A slot holding `generator` for good (a remote server, a test's scripted model):
    /// switching is refused.
    pub fn fixed(generator: Option<SharedGenerator>) -> Self {
        Self::build(
            Current {
                generator,
                ..Current::default()
            },
            None,
        )
    }

    /// A slot that switches by loading files with `loader`; it starts with `generator`
    /// loaded from `file`, or with nothing and the reason the start-up load failed.
    pub fn switchable(
        generator: Option<SharedGenerator>,
        file: Option<PathBuf>,
        failure: Option<String>,
        loader: LlmLoader,
    ) -> Self {
        Self::build(
            Current {
                generator,
                file,
                failure,
            },
            Some(loader),
        )
    }

    fn build(current: Current, loader: Option<LlmLoader>) -> Self {
        Self {
            inner: Arc::new(Inner {
                current: RwLock::new(current),
                switching: tokio::sync::Mutex::new(()),
                loader,
            }),
        }
    }

    fn read(&self) -> Current {
        // A poisoned lock only means a panic elsewhere while swapping two fields; the
        // value is still whole.
        match self.inner.current.read() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The model requests should use now (each request keeps the one it got).
    pub fn current(&self) -> Option<SharedGenerator> {
        self.read().generator
    }

    /// Whether a model is loaded.
    pub fn is_some(&self) -> bool {
        self.read().generator.is_some()
    }

    /// Whether no model is loaded.
    pub fn is_none(&self) -> bool {
        !self.is_some()
    }

    /// The file the current model came from, when it is a local file.
    pub fn file(&self) -> Option<PathBuf> {
        self.read().file
    }

    /// Why the configured model is not loaded (set at start-up when its file cannot be
    /// run; cleared by a successful switch).
    pub fn failure(&self) -> Option<String> {
        self.read().failure
    }

    /// Whether [`switch`](Self::switch) can work (a local engine, not a fixed model).
    pub fn can_switch(&self) -> bool {
        self.inner.loader.is_some()
    }

    /// Loads `path` beside the current model, then makes it the current one. Running
    /// generations finish on the old model, which is freed after them. On failure the
    /// current model stays and the error says why.
    pub async fn switch(&self, path: PathBuf) -> Result<ModelInfo, MlError> {
        let loader = self.inner.loader.clone().ok_or_else(|| {
            MlError::InvalidInput(
                "this server's LLM cannot be switched (it is a remote server or fixed at start-up)"
                    .into(),
            )
        })?;
        let _one = self.inner.switching.lock().await;
        let started = std::time::Instant::now();
        let file = path.clone();
        let span = tracing::Span::current();
        let loaded = tokio::task::spawn_blocking(move || {
            let _g = span.enter();
            loader(&file)
        })
        .await
        .map_err(|e| MlError::Load(format!("the loading thread failed: {e}")))?;
        let generator = match loaded {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "LLM switch failed; the current model stays");
                return Err(e);
            }
        };
        let info = generator.info().clone();
        let old = {
            let mut c = match self.inner.current.write() {
                Ok(c) => c,
                Err(p) => p.into_inner(),
            };
            std::mem::replace(
                &mut *c,
                Current {
                    generator: Some(generator),
                    file: Some(path.clone()),
                    failure: None,
                },
            )
        };
        tracing::info!(
            model = %info.name,
            file = %path.display(),
            previous = ?old.generator.as_ref().map(|g| g.info().name.clone()),
            previous_in_flight = old.generator.as_ref().map(|g| g.in_flight()).unwrap_or(0),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "LLM switched; the previous model is freed once its running generations end"
        );
        Ok(info)
    }
}
