//! Chooses where models run: the GPU when built with `cuda`/`metal` and one is present,
//! else the CPU.

use candle_core::Device;

/// The best device this build can use.
pub fn best_device() -> Device {
    #[cfg(feature = "cuda")]
    if let Ok(d) = Device::new_cuda(0) {
        return d;
    }
    #[cfg(feature = "metal")]
    if let Ok(d) = Device::new_metal(0) {
        return d;
    }
    Device::Cpu
}
