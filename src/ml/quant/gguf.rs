//! GGUF headers whose tensors have types candle 0.9.2 cannot name (IQ4_NL, IQ4_XS, which
//! llama.cpp's Q3_K_M and IQ4_XS files hold, and the IQ1/IQ2/IQ3/TQ types ragd does not
//! run, which must still be named in the load error): candle's header reader fails on them, so
//! [`read_content`] reads the header's bytes itself, lists such tensors with a stand-in
//! type ([`STAND_IN`], Q8_1, which no model file uses for weights) and records each one's
//! real type in the metadata under [`TYPE_KEY`]`<name>`; [`tensor_type`] reads it back.
//! Everything else about the header is candle's own reading.

use std::io::{Cursor, Read, Seek};

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::GgmlDType;

use super::WeightType;

/// The type candle's [`Content`] lists for a tensor whose real type it cannot name.
pub const STAND_IN: GgmlDType = GgmlDType::Q8_1;

/// Metadata key prefix (followed by the tensor's name) of a stand-in tensor's real type.
pub const TYPE_KEY: &str = "ragd.ggml_type.";

/// ggml's type ids of the types only ragd names.
const IQ4_NL: u32 = 20;
const IQ4_XS: u32 = 23;
const Q8_1: u32 = 9;

/// ggml's type ids that candle 0.9.2's header reader knows.
const CANDLE_TYPES: [u32; 15] = [0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 30];

/// llama.cpp's name of ggml type `id`.
fn ggml_type_name(id: u32) -> String {
    const NAMES: [&str; 40] = [
        "F32",
        "F16",
        "Q4_0",
        "Q4_1",
        "Q4_2",
        "Q4_3",
        "Q5_0",
        "Q5_1",
        "Q8_0",
        "Q8_1",
        "Q2_K",
        "Q3_K",
        "Q4_K",
        "Q5_K",
        "Q6_K",
        "Q8_K",
        "IQ2_XXS",
        "IQ2_XS",
        "IQ3_XXS",
        "IQ1_S",
        "IQ4_NL",
        "IQ3_S",
        "IQ2_S",
        "IQ4_XS",
        "I8",
        "I16",
        "I32",
        "I64",
        "F64",
        "IQ1_M",
        "BF16",
        "Q4_0_4_4",
        "Q4_0_4_8",
        "Q4_0_8_8",
        "TQ1_0",
        "TQ2_0",
        "IQ4_NL_4_4",
        "IQ4_NL_4_8",
        "IQ4_NL_8_8",
        "MXFP4",
    ];
    NAMES
        .get(id as usize)
        .map_or_else(|| format!("type {id}"), |n| (*n).to_owned())
}

/// llama.cpp's name of tensor `name`'s type, listed as `listed` in `content` (the real
/// type of a stand-in).
pub fn type_name(content: &Content, name: &str, listed: GgmlDType) -> String {
    if listed == STAND_IN {
        if let Some(Value::U32(id)) = content.metadata.get(&format!("{TYPE_KEY}{name}")) {
            return ggml_type_name(*id);
        }
    }
    ggml_type_name(match listed {
        GgmlDType::F32 => 0,
        GgmlDType::F16 => 1,
        GgmlDType::Q4_0 => 2,
        GgmlDType::Q4_1 => 3,
        GgmlDType::Q5_0 => 6,
        GgmlDType::Q5_1 => 7,
        GgmlDType::Q8_0 => 8,
        GgmlDType::Q8_1 => 9,
        GgmlDType::Q2K => 10,
        GgmlDType::Q3K => 11,
        GgmlDType::Q4K => 12,
        GgmlDType::Q5K => 13,
        GgmlDType::Q6K => 14,
        GgmlDType::Q8K => 15,
        GgmlDType::BF16 => 30,
    })
}

/// Longest string or array the header may declare (a corrupt length fails cleanly).
const MAX_LEN: u64 = 1 << 32;

/// Reads a GGUF header (from the start of `reader`) as candle does, also when tensors
/// have types candle lacks (see the module docs).
pub fn read_content<R: Read + Seek>(reader: &mut R) -> Result<Content, String> {
    if reader.stream_position().map_err(|e| e.to_string())? != 0 {
        return Content::read(reader).map_err(|e| e.to_string());
    }
    let mut tee = Tee {
        inner: reader,
        bytes: Vec::new(),
    };
    let (magic, version) = (tee.u32()?, tee.u32()?);
    if magic != u32::from_le_bytes(*b"GGUF") || version < 2 {
        // Not a GGUF, or version 1 (32-bit lengths): candle's reader says what is wrong.
        tee.inner.rewind().map_err(|e| e.to_string())?;
        return Content::read(tee.inner).map_err(|e| e.to_string());
    }
    let (tensors, kvs) = (tee.u64()?, tee.u64()?);
    for _ in 0..kvs {
        tee.string()?;
        let ty = tee.u32()?;
        tee.skip_value(ty)?;
    }
    let mut real = Vec::new();
    for _ in 0..tensors {
        let name = tee.string()?;
        let dims = tee.u32()?;
        tee.skip(8 * u64::from(dims))?;
        let at = tee.bytes.len();
        let ty = tee.u32()?;
        if !CANDLE_TYPES.contains(&ty) {
            tee.bytes[at..at + 4].copy_from_slice(&Q8_1.to_le_bytes());
            real.push((name, ty));
        }
        tee.skip(8)?;
    }
    let mut content = Content::read(&mut Cursor::new(&tee.bytes)).map_err(|e| e.to_string())?;
    for (name, ty) in real {
        content
            .metadata
            .insert(format!("{TYPE_KEY}{name}"), Value::U32(ty));
    }
    Ok(content)
}

/// The kernels' type of tensor `name` listed as `listed` in `content`, if they run it.
pub fn tensor_type(content: &Content, name: &str, listed: GgmlDType) -> Option<WeightType> {
    if listed == STAND_IN {
        return match content.metadata.get(&format!("{TYPE_KEY}{name}")) {
            Some(Value::U32(IQ4_NL)) => Some(WeightType::IQ4_NL),
            Some(Value::U32(IQ4_XS)) => Some(WeightType::IQ4_XS),
            _ => None,
        };
    }
    Some(match listed {
        GgmlDType::F32 => WeightType::F32,
        GgmlDType::F16 => WeightType::F16,
        GgmlDType::BF16 => WeightType::BF16,
        GgmlDType::Q4_0 => WeightType::Q4_0,
        GgmlDType::Q4_1 => WeightType::Q4_1,
        GgmlDType::Q5_0 => WeightType::Q5_0,
        GgmlDType::Q5_1 => WeightType::Q5_1,
        GgmlDType::Q8_0 => WeightType::Q8_0,
        GgmlDType::Q2K => WeightType::Q2K,
        GgmlDType::Q3K => WeightType::Q3K,
        GgmlDType::Q4K => WeightType::Q4K,
        GgmlDType::Q5K => WeightType::Q5K,
        GgmlDType::Q6K => WeightType::Q6K,
        GgmlDType::Q8_1 | GgmlDType::Q8K => return None,
    })
}

/// A reader that keeps a copy of every byte it reads.
struct Tee<'a, R> {
    inner: &'a mut R,
    bytes: Vec<u8>,
}

impl<R: Read> Tee<'_, R> {
    fn take(&mut self, n: u64) -> Result<(), String> {
        let got = (&mut *self.inner)
            .take(n)
            .read_to_end(&mut self.bytes)
            .map_err(|e| format!("cannot read the GGUF header: {e}"))?;
        if (got as u64) < n {
            return Err("the GGUF header ends early".to_owned());
        }
        Ok(())
    }

    fn last<const N: usize>(&mut self) -> Result<[u8; N], String> {
        self.take(N as u64)?;
        let at = self.bytes.len() - N;
        let mut out = [0u8; N];
        out.copy_from_slice(&self.bytes[at..]);
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.last()?))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.last()?))
    }

    fn len(&mut self) -> Result<u64, String> {
        let n = self.u64()?;
        if n > MAX_LEN {
            return Err(format!("the GGUF header declares a length of {n}"));
        }
        Ok(n)
    }

    fn skip(&mut self, n: u64) -> Result<(), String> {
        self.take(n)
    }

    fn string(&mut self) -> Result<String, String> {
        let n = self.len()?;
        self.take(n)?;
        let at = self.bytes.len() - n as usize;
        Ok(String::from_utf8_lossy(&self.bytes[at..])
            .trim_end_matches('\0')
            .to_owned())
    }

    /// Skips a metadata value of GGUF value type `ty`.
    fn skip_value(&mut self, ty: u32) -> Result<(), String> {
        match ty {
            0 | 1 | 7 => self.skip(1),
            2 | 3 => self.skip(2),
            4..=6 => self.skip(4),
            10..=12 => self.skip(8),
            8 => {
                let n = self.len()?;
                self.skip(n)
            }
            9 => {
                let (inner, n) = (self.u32()?, self.len()?);
                for _ in 0..n {
                    self.skip_value(inner)?;
                }
                Ok(())
            }
            _ => Err(format!("unknown GGUF value type {ty}")),
        }
    }
}
