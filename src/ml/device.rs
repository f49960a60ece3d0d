//! Chooses where the local models run (the `device` setting): a GPU when the build has
//! one (`--features cuda` / `metal`) and it opens, else the CPU, never silently. `auto`
//! says in the log why it runs on the CPU (the driver's own error); an explicit `cuda`
//! or `metal` that cannot be opened is an error the server does not start past.

use std::fmt;

use candle_core::Device;
use serde::Deserialize;

use super::MlError;

/// The `device` setting: `auto`, `cpu`, `cuda`, `cuda:N` or `metal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// A GPU when this build has one and it opens, else the CPU (saying why).
    #[default]
    Auto,
    /// ragd's CPU engines.
    Cpu,
    /// The NVIDIA GPU with this ordinal (`cuda` is `cuda:0`).
    Cuda(usize),
    /// The Apple GPU.
    Metal,
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" | "gpu" => Ok(Self::Cuda(0)),
            "metal" => Ok(Self::Metal),
            _ => match t.strip_prefix("cuda:").map(str::parse::<usize>) {
                Some(Ok(n)) if n < 64 => Ok(Self::Cuda(n)),
                _ => Err(format!(
                    "{s:?} is not a device: expected auto, cpu, cuda, cuda:N (N = 0-63) or metal"
                )),
            },
        }
    }
}

impl<'de> Deserialize<'de> for DeviceChoice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Cpu => f.write_str("cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
            Self::Metal => f.write_str("metal"),
        }
    }
}

/// The device the local models were placed on, with what the log and `/health/ready`
/// say about it.
#[derive(Debug, Clone)]
pub struct Placement {
    /// candle's handle to it.
    pub device: Device,
    /// `cpu`, `cuda:0`, `metal`.
    pub name: String,
    /// The hardware in words: "NVIDIA H100 80GB HBM3, 79.1 GiB, compute 9.0", or the
    /// CPU's kernel tier.
    pub detail: String,
    /// Why a GPU is not used, when `auto` fell back to the CPU.
    pub fallback: Option<String>,
}

impl Placement {
    /// The CPU, with no fallback to explain (an explicit `cpu`, and tests).
    pub fn cpu() -> Self {
        Self {
            device: Device::Cpu,
            name: "cpu".into(),
            detail: cpu_detail(),
            fallback: None,
        }
    }

    /// Whether the models run on a GPU.
    pub fn is_gpu(&self) -> bool {
        !self.device.is_cpu()
    }
}

/// The device `auto` picks (benches, examples and tests that take what the build
/// offers; the server opens its device with [`open`] once).
pub fn best_device() -> Device {
    auto().device
}

/// Which GPU backends this binary was built with.
pub fn gpu_backends() -> &'static [&'static str] {
    &[
        #[cfg(feature = "cuda")]
        "cuda",
        #[cfg(feature = "metal")]
        "metal",
    ]
}

/// Opens the device `choice` names. `auto` never fails: a GPU that does not open is
/// logged with the driver's error and the CPU is used. An explicit GPU that this build
/// lacks or that does not open is an [`MlError::Load`] naming the cause.
pub fn open(choice: DeviceChoice) -> Result<Placement, MlError> {
    let placement = match choice {
        DeviceChoice::Cpu => Placement::cpu(),
        DeviceChoice::Cuda(n) => open_cuda(n)?,
        DeviceChoice::Metal => open_metal()?,
        DeviceChoice::Auto => auto(),
    };
    match &placement.fallback {
        Some(why) => tracing::warn!(
            device = %placement.name,
            detail = %placement.detail,
            reason = %why,
            "models run on the CPU: no GPU could be used"
        ),
        None => tracing::info!(
            device = %placement.name,
            detail = %placement.detail,
            "models placed"
        ),
    }
    Ok(placement)
}

/// `auto`: the first GPU backend of this build that opens, else the CPU with the reasons.
fn auto() -> Placement {
    let mut reasons = Vec::new();
    let why = |e: MlError| match e {
        MlError::Load(m) => m,
        other => other.to_string(),
    };
    if cfg!(feature = "cuda") {
        match open_cuda(0) {
            Ok(p) => return p,
            Err(e) => reasons.push(why(e)),
        }
    }
    if cfg!(feature = "metal") {
        match open_metal() {
            Ok(p) => return p,
            Err(e) => reasons.push(why(e)),
        }
    }
    let mut p = Placement::cpu();
    if reasons.is_empty() {
        // A CPU build: nothing to explain beyond what it is.
        p.detail = format!("{} (this build has no GPU backend)", p.detail);
    } else {
        p.fallback = Some(reasons.join("; "));
    }
    p
}

#[cfg(feature = "cuda")]
fn open_cuda(ordinal: usize) -> Result<Placement, MlError> {
    let device = Device::new_cuda(ordinal).map_err(|e| {
        MlError::Load(format!(
            "cannot open CUDA device {ordinal}: {}",
            first_line(&e)
        ))
    })?;
    let detail = device
        .as_cuda_device()
        .ok()
        .map(|d| {
            let stream = d.cuda_stream();
            let ctx = stream.context();
            let name = ctx.name().unwrap_or_else(|_| "NVIDIA GPU".into());
            let mem = ctx
                .total_mem()
                .map(|b| format!(", {:.1} GiB", b as f64 / (1u64 << 30) as f64))
                .unwrap_or_default();
            let cc = ctx
                .compute_capability()
                .map(|(a, b)| format!(", compute {a}.{b}"))
                .unwrap_or_default();
            format!("{name}{mem}{cc}")
        })
        .unwrap_or_else(|| "NVIDIA GPU".into());
    Ok(Placement {
        device,
        name: format!("cuda:{ordinal}"),
        detail,
        fallback: None,
    })
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(ordinal: usize) -> Result<Placement, MlError> {
    Err(MlError::Load(format!(
        "device cuda:{ordinal}: this binary was built without CUDA support (build it with \
         scripts/build_cuda.sh, or set device to auto or cpu)"
    )))
}

#[cfg(feature = "metal")]
fn open_metal() -> Result<Placement, MlError> {
    let device = Device::new_metal(0)
        .map_err(|e| MlError::Load(format!("cannot open the Metal device: {}", first_line(&e))))?;
    Ok(Placement {
        device,
        name: "metal".into(),
        detail: "Apple GPU".into(),
        fallback: None,
    })
}

#[cfg(not(feature = "metal"))]
fn open_metal() -> Result<Placement, MlError> {
    Err(MlError::Load(
        "device metal: this binary was built without Metal support (build it with \
         `cargo build --release --features metal` on a Mac, or set device to auto or cpu)"
            .into(),
    ))
}

/// The first line of a driver error (candle appends a backtrace to some).
#[cfg(any(feature = "cuda", feature = "metal"))]
fn first_line(e: &candle_core::Error) -> String {
    e.to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// The CPU in words: the kernel tier ragd's engines picked for it.
fn cpu_detail() -> String {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!(
        "{threads} threads, {} kernels",
        super::quant::Tier::detect().name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form_and_refuses_others() {
        for (s, want) in [
            ("auto", DeviceChoice::Auto),
            ("CPU", DeviceChoice::Cpu),
            ("cuda", DeviceChoice::Cuda(0)),
            ("cuda:3", DeviceChoice::Cuda(3)),
            (" metal ", DeviceChoice::Metal),
        ] {
            assert_eq!(s.parse::<DeviceChoice>(), Ok(want), "{s}");
        }
        for bad in ["", "cuda:", "cuda:x", "cuda:-1", "cuda:64", "tpu", "cuda0"] {
            let err = bad.parse::<DeviceChoice>().unwrap_err();
            assert!(err.contains("expected auto, cpu, cuda"), "{bad}: {err}");
        }
        assert_eq!(DeviceChoice::Cuda(2).to_string(), "cuda:2");
        assert_eq!(
            "cuda:2".parse::<DeviceChoice>().unwrap().to_string(),
            "cuda:2"
        );
    }

    #[test]
    fn cpu_and_auto_always_open() {
        let cpu = open(DeviceChoice::Cpu).unwrap();
        assert!(!cpu.is_gpu());
        assert_eq!(cpu.name, "cpu");
        assert!(cpu.fallback.is_none());
        let auto = open(DeviceChoice::Auto).unwrap();
        // A CPU build says so; a GPU build on a machine without one names the reason.
        if gpu_backends().is_empty() {
            assert!(!auto.is_gpu());
            assert!(auto.detail.contains("no GPU backend"), "{}", auto.detail);
        } else if !auto.is_gpu() {
            assert!(auto.fallback.as_deref().is_some_and(|r| !r.is_empty()));
        }
    }

    #[test]
    fn an_explicit_gpu_that_cannot_open_is_an_error_with_the_cause() {
        for choice in [DeviceChoice::Cuda(0), DeviceChoice::Metal] {
            match open(choice) {
                // Only a GPU build on a machine with that GPU opens it.
                Ok(p) => assert!(p.is_gpu()),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(
                        msg.contains("built without") || msg.contains("cannot open"),
                        "{msg}"
                    );
                }
            }
        }
    }
}
