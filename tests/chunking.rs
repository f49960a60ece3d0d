//! Retrieval chunks always fit the embedder's window, with the real tokenizer.

mod common;

use ragd::chunk::for_retrieval;
use ragd::ml::{device, BertEmbedder, Embedder};
use ragd::parse::{parse, Format, ParseOptions};

#[test]
fn every_chunk_fits_and_no_text_is_lost() {
    let model = BertEmbedder::load(
        &common::models_dir().join("all-MiniLM-L6-v2"),
        device::best_device(),
        8,
    )
    .expect("run scripts/setup.sh");
    let counter = model.token_counter();
    let window = model.max_tokens();
    let long_para: String = (0..400)
        .map(|i| format!("Sentence number {i} talks about retrieval. "))
        .collect();
    let no_spaces = "x".repeat(3000);
    let arabic = "اللغة العربية جميلة جدا ".repeat(120);
    let deep: String = (1..=6)
        .map(|l| {
            format!(
                "{} Heading level {l} with quite a few words in it\n\n",
                "#".repeat(l)
            )
        })
        .collect();
    let md = format!(
        "# Guide\n\nShort intro.\n\n## Long part\n\n{long_para}\n\n## Word\n\n{no_spaces}\n\n## Arabic\n\n{arabic}\n\n{deep}Tail text under the deepest heading.\n"
    );
    let doc = parse(
        Format::named("markdown"),
        md.as_bytes(),
        &ParseOptions::default(),
    )
    .unwrap();
    let chunks = for_retrieval(&doc, &counter, window);
    assert!(
        chunks.len() > 10,
        "expected many chunks, got {}",
        chunks.len()
    );
    for c in &chunks {
        let n = counter.count(&c.embed_input());
        assert!(
            n <= window,
            "chunk of {n} tokens > {window}: {:?}",
            &c.text[..c.text.len().min(80)]
        );
        assert!(!c.text.trim().is_empty());
        // The chunker's ids are the ones the embedder would get from the text.
        assert_eq!(
            c.tokens,
            counter.encode(&c.embed_input()).unwrap(),
            "ids differ for {:?}",
            &c.text[..c.text.len().min(80)]
        );
    }
    assert!(
        counter.joins_by_concatenation(),
        "MiniLM's WordPiece joins by concatenation"
    );
    // Every word of the source appears, in order, across the chunks.
    let joined: String = chunks
        .iter()
        .map(|c| c.text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let flat: String = joined.split_whitespace().collect::<Vec<_>>().join("");
    let source_words: String = md
        .lines()
        .filter(|l| !l.starts_with('#'))
        .flat_map(str::split_whitespace)
        .collect::<Vec<_>>()
        .join("");
    assert_eq!(
        flat, source_words,
        "chunk text differs from the source text"
    );
    assert!(chunks.iter().any(|c| c.section_path == "Guide > Long part"));
    assert!(chunks
        .iter()
        .any(|c| c.heading == "Heading level 6 with quite a few words in it"));
}

#[test]
fn a_csv_reaches_the_chunks_as_one_sentence_per_row_with_its_columns() {
    let model = BertEmbedder::load(
        &common::models_dir().join("all-MiniLM-L6-v2"),
        device::best_device(),
        8,
    )
    .expect("run scripts/setup.sh");
    let mut csv = String::from("office,city,country,staff,manager,since\n");
    csv.push_str("South,Lisbon,Portugal,130,Marta Sousa,2015\n");
    for i in 0..200 {
        csv.push_str(&format!(
            "Branch {i},Town {i},Country {i},{},Manager {i},{}\n",
            10 + i,
            1990 + i % 30
        ));
    }
    let doc = parse(
        Format::named("csv"),
        csv.as_bytes(),
        &ParseOptions::default(),
    )
    .unwrap();
    let chunks = for_retrieval(&doc, &model.token_counter(), model.max_tokens());
    assert!(chunks.len() > 1, "{} chunks", chunks.len());
    assert!(chunks[0].text.contains(
        "office: South; city: Lisbon; country: Portugal; staff: 130; manager: Marta Sousa; since: 2015."
    ));
    // Every row, in every chunk, names its columns; no row is cut between chunks.
    let rows: Vec<&str> = chunks
        .iter()
        .flat_map(|c| c.text.lines())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(rows.len(), 201, "{rows:#?}");
    assert!(rows
        .iter()
        .all(|r| r.starts_with("office: ") && r.contains("; manager: ") && r.ends_with('.')));
}
