//! ragd's tokenizer built from llama.cpp's vocabulary-only test GGUFs
//! (`models/ggml-vocab-*.gguf`) against the token ids llama.cpp expects for each input
//! (`.gguf.inp` texts separated by `\n__ggml_vocab_test__\n`, `.gguf.out` one line of ids
//! per text; tests/test-tokenizer-0.cpp there, special tokens not added). Skips with a
//! reason when llama.cpp's sources are not in ~/.cache/llama-bench.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use ragd::ml::llm::LlmTokenizer;

/// The vocabularies of the families ragd supports.
const VOCABS: [&str; 5] = ["qwen2", "llama-bpe", "llama-spm", "phi-3", "gpt-2"];

/// Token ids, one line of them per text (llama.cpp's `.out` files and `ragd-llama-ref`).
fn id_lines(out: &str) -> Vec<Vec<u32>> {
    out.lines()
        .map(|l| {
            l.split_whitespace()
                .map(|x| x.parse().expect("an id"))
                .collect()
        })
        .collect()
}

/// llama.cpp's `models` folder of its sources, if they are cached (else says why not).
fn llama_models_dir() -> Option<PathBuf> {
    let Some(home) = std::env::var_os("HOME") else {
        println!("skipped: no HOME");
        return None;
    };
    let dir = PathBuf::from(home)
        .join(".cache/llama-bench/src/llama_cpp_python-0.3.36/vendor/llama.cpp/models");
    if !dir.is_dir() {
        println!("skipped: {} is missing", dir.display());
        return None;
    }
    Some(dir)
}

#[test]
fn tokenizations_match_llama_cpp() {
    let Some(dir) = llama_models_dir() else {
        return;
    };
    let mut failures = Vec::new();
    for name in VOCABS {
        let gguf = dir.join(format!("ggml-vocab-{name}.gguf"));
        let t = LlmTokenizer::from_vocab_only(&gguf).expect(name);
        let inp = std::fs::read_to_string(dir.join(format!("ggml-vocab-{name}.gguf.inp")))
            .expect("inputs");
        let out = std::fs::read_to_string(dir.join(format!("ggml-vocab-{name}.gguf.out")))
            .expect("outputs");
        let texts: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
        let expected = id_lines(&out);
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

/// Mistral-Nemo's `tekken` pre-tokenizer, which llama.cpp ships no test vocabulary for:
/// llama.cpp's Llama 3 vocabulary relabelled `tekken` (gguf-new-metadata), tokenized by
/// ragd and by llama.cpp's library (`ragd-llama-ref tokenize-raw`) over the Llama 3 test
/// inputs and texts that tell the pre-tokenizers apart (digits one by one, case runs).
#[test]
fn tekken_matches_llama_cpp() {
    let Some(dir) = llama_models_dir() else {
        return;
    };
    let reference = common::engines::made_by(
        "RAGD_TEST_LLAMA_REF",
        "llama-bench/build/bin/ragd-llama-ref",
        "scripts/llama_ref.sh",
    );
    let python = common::engines::made_by(
        "RAGD_TEST_GGUF_PYTHON",
        "ragd-bench/venv/bin/python",
        "scripts/llama_ref.sh",
    );
    let tmp = tempfile::tempdir().expect("temp dir");
    let gguf = tmp.path().join("tekken.gguf");
    let relabel = Command::new(python.with_file_name("gguf-new-metadata"))
        .args(["--pre-tokenizer", "tekken", "--force"])
        .arg(dir.join("ggml-vocab-llama-bpe.gguf"))
        .arg(&gguf)
        .output()
        .expect("gguf-new-metadata runs");
    assert!(
        relabel.status.success(),
        "{}",
        String::from_utf8_lossy(&relabel.stderr)
    );
    let t = LlmTokenizer::from_vocab_only(&gguf).expect("tekken vocabulary");
    let inp = std::fs::read_to_string(dir.join("ggml-vocab-llama-bpe.gguf.inp")).expect("inputs");
    let mut texts: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
    texts.extend([
        "HTTPServer parses JSONData in 2026: 12345 items, 3.14159!",
        "CamelCaseWords and lowerUPPER, x1y2z3",
        "   leading spaces\n\n\ttabs\r\nand lines",
        "don't you'll we've (brackets) [1] {json: true}",
    ]);
    let mut child = Command::new(&reference)
        .arg(&gguf)
        .arg("tokenize-raw")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("ragd-llama-ref runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(texts.join("\n__ggml_vocab_test__\n").as_bytes())
        .expect("writes");
    let out = child.wait_with_output().expect("ragd-llama-ref ends");
    assert!(out.status.success(), "ragd-llama-ref failed");
    let expected = id_lines(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(expected.len(), texts.len(), "one line of ids per text");
    let mut wrong = Vec::new();
    for (text, want) in texts.iter().zip(&expected) {
        let got = t.encode(text).expect("encodes");
        if &got != want {
            println!("tekken: {text:?}: got {got:?}, llama.cpp {want:?}");
            wrong.push(*text);
        }
    }
    println!(
        "tekken: {}/{} inputs match",
        texts.len() - wrong.len(),
        texts.len()
    );
    assert!(wrong.is_empty(), "mismatches: {wrong:?}");
}
