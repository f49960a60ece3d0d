//! ragd's tokenizer built from llama.cpp's vocabulary-only test GGUFs
//! (`models/ggml-vocab-*.gguf`) against the token ids llama.cpp expects for each input
//! (`.gguf.inp` texts separated by `\n__ggml_vocab_test__\n`, `.gguf.out` one line of ids
//! per text; tests/test-tokenizer-0.cpp there, special tokens not added). Skips with a
//! reason when llama.cpp's sources are not in ~/.cache/llama-bench.

use std::path::PathBuf;

use ragd::ml::llm::LlmTokenizer;

/// The vocabularies of the families ragd supports.
const VOCABS: [&str; 5] = ["qwen2", "llama-bpe", "llama-spm", "phi-3", "gpt-2"];

#[test]
fn tokenizations_match_llama_cpp() {
    let Some(home) = std::env::var_os("HOME") else {
        println!("skipped: no HOME");
        return;
    };
    let dir = PathBuf::from(home)
        .join(".cache/llama-bench/src/llama_cpp_python-0.3.36/vendor/llama.cpp/models");
    if !dir.is_dir() {
        println!("skipped: {} is missing", dir.display());
        return;
    }
    let mut failures = Vec::new();
    for name in VOCABS {
        let gguf = dir.join(format!("ggml-vocab-{name}.gguf"));
        let t = LlmTokenizer::from_vocab_only(&gguf).expect(name);
        let inp = std::fs::read_to_string(dir.join(format!("ggml-vocab-{name}.gguf.inp")))
            .expect("inputs");
        let out = std::fs::read_to_string(dir.join(format!("ggml-vocab-{name}.gguf.out")))
            .expect("outputs");
        let texts: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
        let expected: Vec<Vec<u32>> = out
            .lines()
            .map(|l| {
                l.split_whitespace()
                    .map(|x| x.parse().expect("an id"))
                    .collect()
            })
            .collect();
        let mut wrong = 0;
        for (text, want) in texts.iter().zip(&expected) {
            let got = t.encode(text).expect("encodes");
            if &got != want {
                wrong += 1;
                println!("{name}: {text:?}: got {got:?}, llama.cpp {want:?}");
            }
        }
        println!(
            "{name}: {}/{} inputs match",
            texts.len().min(expected.len()) - wrong,
            texts.len().min(expected.len())
        );
        if wrong > 0 {
            failures.push(format!("{name}: {wrong} of {}", expected.len()));
        }
    }
    assert!(failures.is_empty(), "mismatches: {failures:?}");
}
